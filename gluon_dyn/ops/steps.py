"""Per-iteration bookkeeping shared by the imperative foreach and while_loop."""
import mxnet as mx
import numpy as np

from .structure import ControlFlowError, dtype_name, flatten, regroup


def zeros(shape, like):
    """Zeros of `shape` with `like`'s dtype and context; zero-size shapes included
    (`mx.nd.zeros` reads a 0 dimension as "unknown" outside numpy shape mode)."""
    return mx.nd.array(np.zeros(shape, dtype=like.dtype), ctx=like.context, dtype=like.dtype)


def format_text(fmt):
    """A readable rendering of a structure format: 'array', '[array, array]', ..."""
    if fmt is None:
        return "array"
    return "[%s]" % ", ".join(format_text(sub) for sub in fmt)


def flatten_traced_step(op, outputs, new_states, state_fmt, states_name):
    """Flatten a traced body's (outputs, new states); the states must keep `state_fmt`."""
    flat_out, out_fmt = flatten(outputs, op, "step output")
    flat_new, new_fmt = flatten(new_states, op, states_name)
    if new_fmt != state_fmt:
        raise ControlFlowError("%s: the body returned %s structured as %s; it must keep the structure "
                               "of the initial values, %s"
                               % (op, states_name, format_text(new_fmt), format_text(state_fmt)))
    return flat_out, out_fmt, flat_new


def check_states(op, what, new_states, fmt, previous, step):
    """Flatten a body's new states; they must keep the structure, shapes and dtypes they started with."""
    flat, new_fmt = flatten(new_states, op, what)
    if new_fmt != fmt:
        raise ControlFlowError("%s: at step %d the body returned %s structured as %s; it must keep the "
                               "structure of the initial values, %s"
                               % (op, step, what, format_text(new_fmt), format_text(fmt)))
    for i, (new, old) in enumerate(zip(flat, previous)):
        if new.shape != old.shape or new.dtype != old.dtype:
            raise ControlFlowError("%s: %s %d changed from shape %s %s to shape %s %s at step %d; loop "
                                   "state must keep its shape and dtype"
                                   % (op, what, i, old.shape, dtype_name(old), new.shape, dtype_name(new), step))
    return flat


class StepOutputs:
    """Collects each step's outputs and stacks them along a new axis 0."""

    def __init__(self, op):
        self.op = op
        self.fmt = None
        self.steps = []

    def add(self, outputs, step):
        flat, fmt = flatten(outputs, self.op, "step output")
        if self.steps:
            if fmt != self.fmt:
                raise ControlFlowError("%s: step %d returned outputs structured as %s, step 0 as %s"
                                       % (self.op, step, format_text(fmt), format_text(self.fmt)))
            for i, (new, first) in enumerate(zip(flat, self.steps[0])):
                if new.shape != first.shape or new.dtype != first.dtype:
                    raise ControlFlowError("%s: output %d has shape %s %s at step %d but %s %s at step 0"
                                           % (self.op, i, new.shape, dtype_name(new), step,
                                              first.shape, dtype_name(first)))
        self.fmt = fmt
        self.steps.append(flat)

    def stacked(self, rows=None):
        """The stacked outputs, zero-padded to `rows` (default: the number of steps)."""
        columns = list(zip(*self.steps))
        result = []
        for column in columns:
            stacked = mx.nd.stack(*column)
            if rows is not None and rows > len(column):
                first = column[0]
                padding = zeros((rows - len(column),) + first.shape, first)
                stacked = mx.nd.concat(stacked, padding, dim=0)
            result.append(stacked)
        return regroup(result, self.fmt)

    def empty(self, example_outputs, rows):
        """Outputs of a loop that ran no step, shaped like `example_outputs` (one step's worth)."""
        flat, fmt = flatten(example_outputs, self.op, "step output")
        return regroup([zeros((rows,) + o.shape, o) for o in flat], fmt)
