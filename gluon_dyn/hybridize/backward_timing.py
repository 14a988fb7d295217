"""How long a recorded call's backward takes, for the speed check.

A call recorded for training costs its forward and its share of the backward, and
the backward is where a graph often gains most (one planned backward against an
operator per step). The backward runs later, when the user calls `backward()`,
asynchronously on MXNet's engine. A timed recorded call (`RecordedCallTiming`)
brackets its share: its outputs pass through an identity whose backward notes when
their gradients arrived, and each trainable parameter it reads (Parameter.data(),
on both ways of running a call: the graph's inputs and the forward as written)
is a copy passed through an identity whose backward notes when that parameter's
gradient from the call is complete. The backward took from the first note to the
last. Parameters that are not trained (grad_req 'null': BatchNorm's running
statistics, which the forward itself updates) are read as they are.
"""
import contextlib
import threading
import time

import mxnet as mx

from .custom_gradient import Function

_active = threading.local()     # .timing: the RecordedCallTiming of this thread's call
clock = time.perf_counter       # seconds; tests inject their own


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
    """One timed recorded call: its forward's milliseconds, and when the gradients
    of its outputs and of the parameters it read arrived."""

    def __init__(self, variant):
        self.variant = variant
        self.forward_ms = None
        self.started = None          # clock() when the outputs' gradients arrived
        self.finished = None         # ... when the last parameter's gradient was complete
        self.calls_waited = 0        # later calls made while its backward had not started
        self._copies = {}            # Parameter -> its bracketed copy for this call

    @contextlib.contextmanager
    def parameters_bracketed(self):
        """While active (in this thread), Parameter.data() of trainable parameters
        gives their bracketed copies."""
        outer = getattr(_active, "timing", None)
        _active.timing = self
        try:
            yield self
        finally:
            _active.timing = outer

    def bracketed(self, parameter, data):
        if parameter not in self._copies:
            self._copies[parameter] = _Noted(self._parameter_done)(data)
        return self._copies[parameter]

    def outputs_bracketed(self, outputs):
        """`outputs` (an array or nested lists/tuples of them) through the identity
        noting when their gradients arrive."""
        arrays = []
        _collect(outputs, arrays)
        if not arrays:
            return outputs
        copies = _Noted(self._backward_started)(*arrays)
        copies = list(copies) if isinstance(copies, (list, tuple)) else [copies]
        return _rebuild(outputs, iter(copies))

    def _backward_started(self):
        self.started = clock()

    def _parameter_done(self):
        self.finished = clock()

    def total_ms(self):
        """Forward and backward milliseconds; the forward's when no backward ran."""
        if self.started is None or self.finished is None:
            return self.forward_ms
        return self.forward_ms + max(0.0, self.finished - self.started) * 1000


def data_in_timed_calls(data):
    """Parameter.data, giving the bracketed copy of a trainable parameter inside a
    timed recorded call (patches.py)."""
    def wrapper(parameter, *args, **kwargs):
        value = data(parameter, *args, **kwargs)
        timing = getattr(_active, "timing", None)
        if timing is None or parameter.grad_req == "null" or not mx.autograd.is_recording():
            return value
        return timing.bracketed(parameter, value)
    return wrapper


def _collect(value, arrays):
    if isinstance(value, mx.nd.NDArray):
        arrays.append(value)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _collect(item, arrays)


def _rebuild(value, copies):
    if isinstance(value, mx.nd.NDArray):
        return next(copies)
    if isinstance(value, (list, tuple)):
        items = [_rebuild(item, copies) for item in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    return value
