"""Shapes as graph values, for export: `x.shape[d]` read by traced code becomes a
SymbolicDim, computed by the graph from the shape of `x` when it runs.

Python code that only passes such a dimension on keeps working and the exported
graph serves every size: `range(seq.shape[0])` becomes a graph loop over that many
steps, `nd.zeros((x.shape[1], H))` (also `ones`, `full`) an array broadcast to
`x`'s size, `x.reshape((x.shape[0], -1))` MXNet's "copy this dimension" code,
arithmetic gives dimensions computed in the graph, and a comparison gives a tensor
predicate (a `cond`). A use that needs a Python int stops the export naming the
line.
"""
import operator

import mxnet as mx

from ...origin import user_location
from .fallback_required import FallbackRequired


class SymbolicDim:
    """A dimension known when the graph runs. `example` is its size in the call the
    export traced; `origin` is (array Symbol, axis) for a dimension read from an
    array's shape, None for one computed from others."""

    def __init__(self, example, graph_value, origin=None):
        self.example, self._graph_value, self.origin = example, graph_value, origin

    @classmethod
    def of(cls, symbol, axis, example):
        return cls(example, None, (symbol, axis))

    def graph_value(self):
        """The size as a one-element float32 Symbol."""
        if self._graph_value is None:
            symbol, axis = self.origin
            self._graph_value = mx.sym.cast(mx.sym.slice_axis(
                mx.sym.shape_array(symbol), axis=0, begin=axis, end=axis + 1), dtype="float32")
        return self._graph_value

    def _computed(self, other, python_op, graph_op, reverse=False):
        if isinstance(other, SymbolicDim):
            left, right = (other, self) if reverse else (self, other)
            return SymbolicDim(python_op(left.example, right.example),
                               graph_op(left.graph_value(), right.graph_value()))
        if not isinstance(other, int):
            return NotImplemented
        graph = (lambda value: graph_op(mx.sym.full((1,), other), value)) if reverse else \
            (lambda value: graph_op(value, mx.sym.full((1,), other)))
        return SymbolicDim(python_op(other, self.example) if reverse else
                           python_op(self.example, other), graph(self.graph_value()))

    def __add__(self, other):
        return self._computed(other, operator.add, mx.sym.broadcast_add)

    def __radd__(self, other):
        return self._computed(other, operator.add, mx.sym.broadcast_add, reverse=True)

    def __sub__(self, other):
        return self._computed(other, operator.sub, mx.sym.broadcast_sub)

    def __rsub__(self, other):
        return self._computed(other, operator.sub, mx.sym.broadcast_sub, reverse=True)

    def __mul__(self, other):
        return self._computed(other, operator.mul, mx.sym.broadcast_mul)

    __rmul__ = __mul__

    def __floordiv__(self, other):
        return self._computed(other, operator.floordiv,
                              lambda a, b: mx.sym.floor(mx.sym.broadcast_div(a, b)))

    def _compared(self, other, graph_op):
        right = other.graph_value() if isinstance(other, SymbolicDim) else \
            mx.sym.full((1,), float(other))
        return graph_op(self.graph_value(), right)

    def __lt__(self, other):
        return self._compared(other, mx.sym.broadcast_lesser)

    def __le__(self, other):
        return self._compared(other, mx.sym.broadcast_lesser_equal)

    def __gt__(self, other):
        return self._compared(other, mx.sym.broadcast_greater)

    def __ge__(self, other):
        return self._compared(other, mx.sym.broadcast_greater_equal)

    def _as_python_int(self, *args):
        raise FallbackRequired(
            "an array's size is used as a Python int (%d in the traced call); an exported graph "
            "computes sizes when it runs, so it can use them only to build arrays, in range(), "
            "reshape and arithmetic" % self.example, user_location())

    __index__ = __int__ = __bool__ = __eq__ = __ne__ = __hash__ = _as_python_int

    def __repr__(self):
        return "SymbolicDim(%d)" % self.example


def symbolic_shape(symbol, example_shape):
    return tuple(SymbolicDim.of(symbol, axis, size) for axis, size in enumerate(example_shape))


def holds_dims(values):
    return any(isinstance(v, SymbolicDim) or (isinstance(v, (list, tuple)) and holds_dims(v))
               for v in values)


_CREATION = {mx.sym.zeros: 0.0, mx.sym.ones: 1.0}


def call_with_dims(f, args, kwargs):
    """`f(*args, **kwargs)` (an mx.sym function) where sizes are SymbolicDims."""
    kwargs = dict(kwargs or {})
    if f in _CREATION or f is mx.sym.full:
        shape = kwargs.pop("shape", args[0] if args else None)
        rest = args[1:]
        value = _CREATION[f] if f in _CREATION else kwargs.pop("val", rest[0] if rest else 0.0)
        return _broadcast_full(tuple(shape), value, kwargs.get("dtype", "float32"))
    if f is mx.sym.reshape:
        data = args[0] if args else kwargs.pop("data")
        shape = kwargs.pop("shape", args[1] if len(args) > 1 else None)
        return mx.sym.reshape(data, shape=_reshape_codes(data, shape), **kwargs)
    raise FallbackRequired(
        "an array's size read from a shape is passed to %s; an exported graph can use such "
        "sizes in zeros/ones/full, reshape, range() and arithmetic"
        % getattr(f, "__name__", type(f).__name__), user_location())


def _broadcast_full(shape, value, dtype):
    """An array of `value` whose SymbolicDim sizes follow the arrays they come from."""
    result = mx.sym.full(shape=tuple(1 if isinstance(d, SymbolicDim) else d for d in shape),
                         val=value, dtype=dtype)
    for axis, dim in enumerate(shape):
        if isinstance(dim, SymbolicDim):
            if dim.origin is None:
                raise FallbackRequired(
                    "an array is created with a size computed from other sizes (%d in the traced "
                    "call); an exported graph can create arrays only with sizes read from an "
                    "array's shape" % dim.example, user_location())
            source, source_axis = dim.origin
            result = mx.sym.broadcast_like(result, source, lhs_axes=(axis,),
                                           rhs_axes=(source_axis,))
    return result


def _reshape_codes(data, shape):
    """A reshape target where each SymbolicDim is `data`'s own size on that axis (MXNet's
    code 0), the only way MXNet 1.9.1 reshapes to a size known at run time."""
    codes = []
    for axis, dim in enumerate(shape):
        if isinstance(dim, SymbolicDim):
            if dim.origin is None or dim.origin[1] != axis or \
                    dim.origin[0].name != data.name:
                raise FallbackRequired(
                    "reshape to a size read from another array's shape or axis; an exported "
                    "graph can keep an axis's own size only (x.reshape((x.shape[0], -1)))",
                    user_location())
            codes.append(0)
        else:
            codes.append(dim)
    return tuple(codes)
