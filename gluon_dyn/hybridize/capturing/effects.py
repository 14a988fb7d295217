"""Appends to Python lists under a branch or loop on a tensor, kept in the graph.

Imperatively, `acc.append(h)` inside `if tensor:` or `while tensor:` makes the
list's contents depend on data. While tracing, such appends are collected per
staged branch or loop body (an EffectFrame); the branch or loop routes the
appended values out as extra outputs, and the list receives markers standing
for elements that exist only in some runs:

- Conditional(value, present): one element, there when `present` (a one-element
  0/1 float32 Symbol) is 1;
- Rows(stacked, valid): the rows of `stacked` whose entry of `valid` is 1, in
  order (the appends of a graph loop, one or more per iteration).

Later code may stack, sum or add such a list (consumers.py turns that into graph
operations over the present elements); any other use of a marker stops the trace
with a reason naming the statement, and the forward runs as Python.
"""
import mxnet as mx

from ...ops import ControlFlowError
from ...origin import caller_location, raised_in_user_code, user_location
from . import guards, tracing


class _Marker:
    """An element of a list whose presence depends on a tensor."""

    def __getattr__(self, name):
        raise tracing.FallbackRequired(
            "an element appended to a list under a branch or loop on a tensor is used as a value "
            "(`.%s`); such lists can be stacked, summed or added, not read element by element"
            % name, caller_location())

    def _refuse(self, *args):
        raise tracing.FallbackRequired(
            "an element appended to a list under a branch or loop on a tensor is used in "
            "arithmetic; such lists can be stacked, summed or added, not read element by element",
            caller_location())

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = _refuse
    __rtruediv__ = __neg__ = __lt__ = __le__ = __gt__ = __ge__ = __bool__ = _refuse


# Python values a list may receive under tensor control flow: kept as they are, only
# their presence is a graph value.
CONSTANTS = (bool, int, float, str, type(None))


class Conditional(_Marker):
    """`value` (a Symbol, or a Python constant) present when `present` is 1."""

    def __init__(self, value, present):
        self.value, self.present = value, present

    def parts(self):
        return ([] if isinstance(self.value, CONSTANTS) else [self.value]) + [self.present]

    def rebuild(self, parts, presence):
        """From routed-out `parts`, present only where `presence` (0/1) holds too."""
        if isinstance(self.value, CONSTANTS):
            return Conditional(self.value, parts[0] * presence)
        return Conditional(parts[0], parts[1] * presence)


class Rows(_Marker):
    def __init__(self, stacked, valid):
        self.stacked, self.valid = stacked, valid

    def parts(self):
        return [self.stacked, self.valid]

    def rebuild(self, parts, presence):
        return Rows(parts[0], mx.sym.broadcast_mul(parts[1], presence))


def is_marker(value):
    return isinstance(value, _Marker)


def refuse_markers(value, use):
    """Stop the trace if `value` is a list holding markers that Python code would
    `use` (test, index, iterate): how many elements it has depends on the data."""
    # A shape holds sizes, and iterating it would count every size as read.
    if isinstance(value, (list, tuple)) and not isinstance(value, tracing.ReadShape) and \
            tracing.current() is not None and any(is_marker(item) for item in value):
        raise tracing.FallbackRequired(
            "a list appended to under a branch or loop on a tensor is %s in Python; such lists "
            "can be stacked, concatenated along dim 0, summed or added" % use,
            caller_location(depth=3))


def flag(predicate):
    """A tensor predicate as a one-element 0/1 float32 Symbol."""
    return mx.sym.cast(guards.truth(mx.sym.reshape(predicate, shape=(1,))), dtype="float32")


class EffectFrame:
    """Context manager around the trace of a branch or loop body: lists appended to
    inside it get their appends back out (and are left as they were), per list in
    first-append order, as `appends` [(list, [appended values])]; the guards made
    inside it are collected in `guards`, for the branch or loop to route out."""

    def __init__(self):
        self._lengths = {}     # id(list) -> (list, length when first appended to here)
        self.appends = []
        self.guards = []

    def __enter__(self):
        trace = tracing.current()
        self._trace = trace
        if trace is not None:
            trace.effect_frames.append(self)
        return self

    def note(self, target):
        """`target` is about to be appended to inside this frame. (list's own methods:
        a block's watched list must not count this as the forward reading it.)"""
        self._lengths.setdefault(id(target), (target, list.__len__(target)))

    def __exit__(self, error_type, error, traceback):
        if self._trace is not None:
            self._trace.effect_frames.pop()
        for target, length in self._lengths.values():
            self.appends.append((target, list.__getitem__(target, slice(length, None))))
            list.__delitem__(target, slice(length, None))
        if error is not None and not isinstance(error, (tracing.FallbackRequired,
                                                        ControlFlowError)) \
                and raised_in_user_code(error):
            # A graph cannot raise: the code that may raise runs as Python.
            raise tracing.FallbackRequired(
                "a branch or loop body on a tensor raises %s (%s)" % (type(error).__name__, error),
                user_location()) from error


def note_append(target):
    """Converted code appends to the Python list `target` (append, extend, +=)."""
    trace = tracing.current()
    if trace is not None and trace.effect_frames:
        trace.effect_frames[-1].note(target)
