"""How long a recorded call's backward takes, for the speed check.

A call recorded for training costs its forward and its share of the backward, and
the backward is where a graph often gains most (one planned backward against an
operator per step). The backward runs later, when the user calls `backward()`,
asynchronously on MXNet's engine. A timed recorded call (`RecordedCallTiming`)
passes its outputs through an identity whose backward notes when their gradients
arrived: the backward reached the call there. The `backward()` that got there
(patched: `timing_backward`) waits for MXNet's work queued before it, runs, and
waits for all of its own: the call's share ends there.

The share so runs from the call's outputs to the end of the whole backward: all of
the block's, and whatever was recorded before the block and feeds it (nothing,
where the block is the model). It costs a timed call one node and two waits, the
same for the graph and the forward as written. Bracketing each parameter the call
reads instead (an identity per parameter, noting when its gradient is complete)
cost a Python callback per parameter on MXNet's custom-operator thread: a
MobileNet's training step took 124 ms timed against 32 ms untimed, which hid what
the graph gains and made every measured call 4x slower than imperative.
"""
import time
import weakref

import mxnet as mx

from ...ops.gradient_flow import has_history
from .custom_gradient import Function

clock = time.perf_counter       # seconds; tests inject their own
# Timed recorded calls whose outputs' gradients have not arrived yet.
_awaiting = weakref.WeakSet()


class _Noted(Function):
    """Identity whose backward calls `note()` (copies: an output must be a new array)."""

    def __init__(self, note):
        super().__init__()
        self.note = note

    def forward(self, *arrays):
        copies = tuple(array.copy() for array in arrays)
        return copies[0] if len(copies) == 1 else copies

    def backward(self, *gradients):
        self.note()
        return gradients[0] if len(gradients) == 1 else gradients


class RecordedCallTiming:
    """One timed recorded call: its forward's milliseconds, and when its backward
    reached its outputs and when that backward had finished."""

    def __init__(self, variant, when_finished=None):
        self.variant = variant
        # Called once its backward has finished: a weakref.WeakMethod, so that the
        # speed check holding this timing is not held by it in turn.
        self.when_finished = when_finished
        self.forward_ms = None
        self.returned_ms = None      # when the forward had returned to the caller
        self.started = None          # clock() when the outputs' gradients arrived
        self.finished = None         # ... when the backward that got there had finished
        self.calls_waited = 0        # later calls made while its backward had not started

    def outputs_bracketed(self, outputs):
        """`outputs` (an array or nested lists/tuples of them) through the identity
        noting when their gradients arrive; those without autograd history (made from
        constants) as they are, so that in-place writes into them work as imperatively
        (a graph break after the call writes into them)."""
        arrays = []
        _collect(outputs, arrays)
        if not arrays:
            return outputs
        copies = _Noted(self._backward_started)(*arrays)
        copies = list(copies) if isinstance(copies, (list, tuple)) else [copies]
        _awaiting.add(self)
        return _rebuild(outputs, iter(copies))

    def _backward_started(self):
        self.started = clock()

    def total_ms(self):
        """Forward and backward milliseconds; the forward's when no backward ran."""
        if self.started is None or self.finished is None:
            return self.forward_ms
        return self.forward_ms + max(0.0, self.finished - self.started) * 1000


def timing_backward(backward):
    """MXNet's backward (autograd.backward, NDArray.backward), timed to completion
    when a timed recorded call awaits its backward (patches.py): a backward that
    reached such a call's outputs finishes its share."""
    def wrapper(*args, **kwargs):
        if not _awaiting:
            return backward(*args, **kwargs)
        mx.nd.waitall()     # the work queued before (the loss) is not the backward's
        result = backward(*args, **kwargs)
        mx.nd.waitall()
        finished = clock()
        for timing in list(_awaiting):
            if timing.started is not None:
                timing.finished = finished
                _awaiting.discard(timing)
                told = timing.when_finished() if timing.when_finished is not None else None
                if told is not None:
                    told()
        return result
    wrapper.__doc__, wrapper.__name__ = backward.__doc__, backward.__name__
    return wrapper


def _collect(value, arrays):
    if isinstance(value, mx.nd.NDArray) and has_history(value):
        arrays.append(value)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _collect(item, arrays)


def _rebuild(value, copies):
    if isinstance(value, mx.nd.NDArray) and has_history(value):
        return next(copies)
    if isinstance(value, (list, tuple)):
        items = [_rebuild(item, copies) for item in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    return value
