"""The `mx.nd` functions that `mx.sym` has no function of the same name for, on Symbols.

Traced NDArray code calls `mx.nd.*` on Symbols, which calls.py sends to the
`mx.sym` function of the same name (and `F.add(a, b)` with `F=mx.nd`, as MXNet's
examples pass it). A few `mx.nd` functions are Python helpers without a Symbol
twin: `add`, `subtract`, `multiply`, `divide`, `modulo`, the comparisons and
logical operators (which broadcast two arrays and take a number as a scalar),
`concatenate`, `moveaxis`, `empty`, and `contrib.isnan`, `isinf`, `isfinite`; and
`arange` and `linspace` take a `ctx` their Symbol twins do not (the graph runs on
one context); `array` of a NumPy array argument is that graph input
(numpy_arguments.py). Here they are on Symbols, with NDArray's meaning.
"""
import mxnet as mx
import numpy as np

from ....origin import user_location
from ...capturing import tracing
from ...capturing.numpy_arguments import is_numpy_argument
from . import attributes


def _elementwise(broadcasting, python_operator):
    """An `mx.nd` function of two operands (NDArray's _ufunc_helper): arrays
    broadcast, a number is a scalar operand."""
    def function(lhs, rhs):
        if isinstance(lhs, mx.sym.Symbol) and isinstance(rhs, mx.sym.Symbol):
            return broadcasting(lhs, rhs)
        return python_operator(lhs, rhs)
    return function


def _logical(name, broadcasting, scalar):
    def function(lhs, rhs):
        if isinstance(lhs, mx.sym.Symbol) and isinstance(rhs, mx.sym.Symbol):
            return broadcasting(lhs, rhs)
        if isinstance(lhs, mx.sym.Symbol):
            return scalar(lhs, scalar=float(rhs))
        if isinstance(rhs, mx.sym.Symbol):
            return scalar(rhs, scalar=float(lhs))
        return getattr(mx.nd, name)(lhs, rhs)    # two numbers
    return function


def _without_context(function):
    """An `mx.sym` function making an array whose `mx.nd` twin takes `ctx` (which the
    graph's context answers) and it does not."""
    def call(*args, ctx=None, **kwargs):
        if ctx is not None:
            attributes.check_graph_context(ctx, "mx.nd.%s(ctx=...)" % function.__name__)
        return function(*args, **kwargs)
    return call


def empty(shape, ctx=None, dtype=None, stype=None):
    """`mx.nd.empty`: its values are whatever memory held; zeros are such values."""
    if stype not in (None, "default"):
        raise tracing.FallbackRequired("mx.nd.empty(stype=%r): sparse arrays are not traced"
                                       % stype, user_location())
    return _without_context(mx.sym.zeros)(shape, ctx=ctx, dtype=dtype or "float32")


def array(source_array, ctx=None, dtype=None):
    """`mx.nd.array`: of a NumPy argument (numpy_arguments.py) or of an array, a graph
    value (the dtype asked, else float32 from NumPy as NDArray makes it, or the
    array's own); of Python values, the constant NDArray makes."""
    if ctx is not None:
        attributes.check_graph_context(ctx, "mx.nd.array(ctx=...)")
    if is_numpy_argument(source_array):
        return mx.sym.cast(source_array.symbol, dtype=np.dtype(dtype or "float32").name)
    if isinstance(source_array, mx.sym.Symbol):
        if dtype is None:
            return mx.sym.identity(source_array)
        return mx.sym.cast(source_array, dtype=np.dtype(dtype).name)
    return mx.nd.array(source_array, dtype=dtype)


def concatenate(arrays, axis=0, always_copy=True):   # pylint: disable=unused-argument
    return mx.sym.concat(*arrays, dim=axis)


def moveaxis(tensor, source, destination):
    ndim = len(tracing.current().shape_of(tensor))
    source, destination = source % ndim, destination % ndim
    axes = [axis for axis in range(ndim) if axis != source]
    axes.insert(destination, source)
    return mx.sym.transpose(tensor, axes=tuple(axes))


def isnan(data):
    return data != data


def isinf(data):
    return mx.sym.abs(data) == np.inf


def isfinite(data):
    return mx.sym.broadcast_logical_and(mx.sym.abs(data) != np.inf, data == data)


_OPERATORS = {
    "add": (mx.sym.broadcast_add, lambda a, b: a + b),
    "subtract": (mx.sym.broadcast_sub, lambda a, b: a - b),
    "multiply": (mx.sym.broadcast_mul, lambda a, b: a * b),
    "divide": (mx.sym.broadcast_div, lambda a, b: a / b),
    "true_divide": (mx.sym.broadcast_div, lambda a, b: a / b),
    "modulo": (mx.sym.broadcast_mod, lambda a, b: a % b),
    "equal": (mx.sym.broadcast_equal, lambda a, b: a == b),
    "not_equal": (mx.sym.broadcast_not_equal, lambda a, b: a != b),
    "greater": (mx.sym.broadcast_greater, lambda a, b: a > b),
    "greater_equal": (mx.sym.broadcast_greater_equal, lambda a, b: a >= b),
    "lesser": (mx.sym.broadcast_lesser, lambda a, b: a < b),
    "lesser_equal": (mx.sym.broadcast_lesser_equal, lambda a, b: a <= b),
}
_LOGICAL = {"logical_and": (mx.sym.broadcast_logical_and, mx.sym._internal._logical_and_scalar),
            "logical_or": (mx.sym.broadcast_logical_or, mx.sym._internal._logical_or_scalar),
            "logical_xor": (mx.sym.broadcast_logical_xor, mx.sym._internal._logical_xor_scalar)}

# id(mx.nd function) -> its function on Symbols (calls.py).
SYMBOLIC = {id(getattr(mx.nd, name)): _elementwise(*pair) for name, pair in _OPERATORS.items()}
SYMBOLIC.update({id(getattr(mx.nd, name)): _logical(name, *pair) for name, pair in _LOGICAL.items()})
SYMBOLIC.update({id(mx.nd.array): array, id(mx.nd.ndarray.array): array})
SYMBOLIC.update({id(mx.nd.arange): _without_context(mx.sym.arange),
                 id(mx.nd.linspace): _without_context(mx.sym.linspace), id(mx.nd.empty): empty})
SYMBOLIC.update({id(mx.nd.concatenate): concatenate, id(mx.nd.moveaxis): moveaxis,
                 id(mx.nd.contrib.isnan): isnan, id(mx.nd.contrib.isinf): isinf,
                 id(mx.nd.contrib.isfinite): isfinite})
