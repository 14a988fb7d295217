"""What a body returns: arrays, possibly in nested lists and tuples (a Tree-LSTM
cell's `(h, [h, c])`), each array's shape and dtype. Part of every caller's
signature, and of the arenas its results are kept in (batched_graph.py)."""
import dataclasses

import mxnet as mx

from .unsupported import Unsupported

_IN_USE = {}   # OutputType -> the one equal OutputType in use


@dataclasses.dataclass(frozen=True)
class OutputType:
    """`layout`: None for one array, else (list or tuple, (layout per item, ...));
    `arrays`: ((shape, dtype), ...) of the arrays, flattened in order."""
    layout: object
    arrays: tuple

    def structure(self, values):
        """The returned value made of `values`, the flattened arrays."""
        return _build(self.layout, iter(values))

    def __str__(self):
        return _text(self.layout, iter(self.arrays))


def output_type(layout, arrays):
    """The OutputType, one object per type: matching compares a callee's type with
    the one traced by identity first (compiled_walk.py)."""
    made = OutputType(layout, tuple(arrays))
    return _IN_USE.setdefault(made, made)


def flatten(value, function):
    """(layout, Symbols) of what `function`'s trace returned."""
    if isinstance(value, mx.sym.Symbol):
        outputs = list(value) if len(value.list_outputs()) > 1 else [value]
        return (None if len(outputs) == 1 else (list, (None,) * len(outputs))), outputs
    if type(value) in (list, tuple) and value:
        layouts, symbols = [], []
        for item in value:
            layout, found = flatten(item, function)
            layouts.append(layout)
            symbols += found
        return (type(value), tuple(layouts)), symbols
    raise Unsupported("%s returns %s, not arrays (in lists or tuples)" % (
        function, type(value).__name__), function.location)


def _build(layout, values):
    if layout is None:
        return next(values)
    return layout[0](_build(item, values) for item in layout[1])


def _text(layout, arrays):
    if layout is None:
        shape, dtype = next(arrays)
        return "%s %s" % (shape, dtype.__name__)
    opening, closing = ("[", "]") if layout[0] is list else ("(", ")")
    return opening + ", ".join(_text(item, arrays) for item in layout[1]) + closing
