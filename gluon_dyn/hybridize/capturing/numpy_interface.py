"""MXNet's numpy interface (`from mxnet import np, npx; npx.set_np()`) in traced code.

In np mode arrays are `mx.np.ndarray`s and symbols `mx.sym.np._Symbol`s, and the
two kinds of operators reject each other's arrays: np ones (`_npi_*`, `_npx_*`,
which Gluon's layers call in np mode) take only np arrays, legacy ones only legacy
arrays. A trace gives converted code np symbols where the call gave np arrays, as
Gluon's own graphs do; gluon_dyn builds its graph operators, guards and counters
with legacy operators. Both kinds are views of the same graph node
(`as_nd_ndarray`/`as_np_ndarray` add none), so values cross at the statements'
boundary: legacy where a statement reads them (a predicate, the variables a branch
or loop changes), np again where the code reads them back.

np predicates are booleans, which MXNet's `_cond` and the legacy comparisons
cannot take: a predicate crosses as its truth, a 0/1 float32 value.
"""
import mxnet as mx

from ...ops.numpy_arrays import NumpySymbol, as_numpy, truth
from . import tracing

__all__ = ["NumpySymbol", "is_numpy_symbol", "as_legacy", "as_numpy", "truth", "mode",
           "StateBoundary", "statement_boundary", "predicate", "as_code_number",
           "as_legacy_number"]


def is_numpy_symbol(value):
    return isinstance(value, NumpySymbol)


def mode():
    """The interface calls run under: (np shape semantics, np arrays), as
    `npx.set_np()` sets them. Graphs are keyed on it: the same operators give other
    shapes under np shape semantics (a reduction gives () rather than (1,))."""
    return mx.util.is_np_shape(), np_arrays()


def np_arrays():
    """mode()'s second part, read without the C call of its first."""
    return mx.util.is_np_array()


def as_legacy(value):
    """`value` with every np symbol in it (nested in lists and tuples) as a legacy one
    (arrays stay as they are: the code's constants, captured as it made them)."""
    if isinstance(value, NumpySymbol):
        return value.as_nd_ndarray()
    if isinstance(value, (list, tuple)) and _holds_numpy(value):
        items = [as_legacy(item) for item in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    return value


def _holds_numpy(value):
    if isinstance(value, (list, tuple)):
        return any(_holds_numpy(item) for item in value)
    return isinstance(value, NumpySymbol)


def as_legacy_number(value):
    """An np symbol standing for a number (a loop bound) as the one-element float32
    legacy symbol gluon_dyn's counters compare with; anything else as it is."""
    if not isinstance(value, NumpySymbol):
        return value
    return mx.sym.reshape(mx.sym.cast(value.as_nd_ndarray(), dtype="float32"), shape=(1,))


def numpy_trace():
    """Whether the trace in progress traces code in np mode."""
    trace = tracing.current()
    return trace is not None and trace.numpy


class StateBoundary:
    """The get_state/set_state pair malt gives a statement, as gluon_dyn's statements
    use it: values read as legacy symbols, values given back as the kind the code
    had at the same place (np where it had an np symbol, legacy where a legacy one;
    a Python value that became a tensor, a loop counter, as np in an np trace)."""

    def __init__(self, get_state, set_state):
        self._get, self._set = get_state, set_state
        self._numpy = {}     # leaf position -> whether the code held an np symbol there

    def get_state(self):
        values = self._get()
        for position, leaf in _leaves(values):
            if isinstance(leaf, mx.sym.Symbol):
                self._numpy[position] = self._numpy.get(position, False) or \
                    isinstance(leaf, NumpySymbol)
        return as_legacy(values)

    def set_state(self, values):
        self._set(self.returned(values))

    def returned(self, values, position=()):
        """`values` (at `position` among the state) as the code reads them."""
        if isinstance(values, mx.sym.Symbol) and not isinstance(values, NumpySymbol):
            return values.as_np_ndarray() if self._numpy.get(position, numpy_trace()) else values
        if isinstance(values, (list, tuple)):
            items = [self.returned(item, position + (index,)) for index, item in enumerate(values)]
            return type(values)(*items) if hasattr(values, "_fields") else type(values)(items)
        return values


def _leaves(value, position=()):
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _leaves(item, position + (index,))
    else:
        yield position, value


def statement_boundary(get_state, set_state):
    """The get_state/set_state pair of a statement, through a StateBoundary while a
    trace is in progress (it may hold np symbols); as it is otherwise."""
    if tracing.current() is None:
        return get_state, set_state
    boundary = StateBoundary(get_state, set_state)
    return boundary.get_state, boundary.set_state


def predicate(test):
    """`test` (a loop's test, malt's extra test), its result as gluon_dyn's graph
    operators take it (truth)."""
    if test is None:
        return None
    return lambda: truth(test())


def as_code_number(value):
    """A Symbol standing for a Python number in the code (a graph loop's counter), as
    the code reads it: an np symbol in an np trace."""
    if numpy_trace() and isinstance(value, mx.sym.Symbol):
        return value.as_np_ndarray()
    return value
