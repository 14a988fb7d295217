"""The numpy interface's functions (`mx.np.*`, `mx.npx.*`) in traced code.

Code in np mode calls `np.dot`, `npx.one_hot`, `np.random.uniform`; traced, their
arguments are np symbols, so each call goes to the np symbol function of the same
name (`mx.sym.np.*`, `mx.sym.npx.*`), as calls.py sends `mx.nd.*` to `mx.sym.*`.
Some have no symbol function: `np.nonzero` is built from `npx.nonzero` as MXNet
builds it; `np.shape`, `np.ndim` and `np.size` read the trace's shapes; the others,
given a symbol, stop the trace naming the function (without one they run as they
are). An np function given Python values only makes a constant: it runs while
tracing, as written (runs_as_constant).
"""
import functools

import mxnet as mx

from ....origin import user_location
from ...capturing import tracing
from ...capturing.numpy_interface import NumpySymbol
from .numpy_subscripts import get_item

_NAMESPACES = [(mx.np, mx.sym.np), (mx.npx, mx.sym.npx), (mx.np.random, mx.sym.np.random),
               (mx.np.linalg, mx.sym.np.linalg)]


def nonzero(a):
    """`np.nonzero(a)`: a tuple of the indices of the nonzero elements, one array per
    axis, as MXNet computes it (rows of npx.nonzero's transpose)."""
    indices = mx.sym.np.transpose(mx.sym.npx.nonzero(a))
    return tuple(get_item(indices, axis) for axis in range(len(tracing.current().shape_of(a))))


def shape(a):
    return tracing.current().shape_of(a)


def ndim(a):
    return len(tracing.current().shape_of(a))


def size(a):
    return functools.reduce(lambda x, y: x * y, tracing.current().shape_of(a), 1)


_BUILT_HERE = {mx.np.nonzero: nonzero, mx.np.shape: shape, mx.np.ndim: ndim, mx.np.size: size}


def _tables():
    """{id(np function): what a trace calls instead}, {id(np function): its name} of
    those without a graph form."""
    symbolic, without = {}, {}
    for imperative, symbol_namespace in _NAMESPACES:
        prefix = imperative.__name__.replace("mxnet.numpy_extension", "npx").replace(
            "mxnet.numpy", "np")
        for name in dir(imperative):
            function = getattr(imperative, name)
            if name.startswith("_") or not callable(function) or isinstance(function, type):
                continue
            if function in _BUILT_HERE:
                symbolic[id(function)] = _BUILT_HERE[function]
            elif hasattr(symbol_namespace, name):
                symbolic[id(function)] = getattr(symbol_namespace, name)
            else:
                without[id(function)] = "%s.%s" % (prefix, name)
    return symbolic, without


SYMBOLIC, _WITHOUT_GRAPH_FORM = _tables()
# Functions drawing random numbers: each call draws anew, in the graph too.
_RANDOM = {id(getattr(namespace, name)) for namespace in (mx.np.random, mx.npx.random)
           for name in dir(namespace) if callable(getattr(namespace, name))}


def runs_as_constant(function, args, kwargs):
    """Whether the np function call `function(*args, **kwargs)` makes a constant: an
    np function (not a random one) given Python values only (`np.arange(h)`,
    `np.zeros((n, 4))`, shapes and sizes the graph is specialised to). It runs as
    it is while tracing, and its array is captured as a graph input, as arrays made
    outside converted code are; code computing from constants (d2l's anchor boxes,
    `np.meshgrid` of them) then runs on arrays, as it would as written."""
    return (id(function) in SYMBOLIC or id(function) in _WITHOUT_GRAPH_FORM) and \
        id(function) not in _RANDOM and \
        not _holds_array(list(args) + list((kwargs or {}).values()))


def _holds_array(values, kinds=(mx.sym.Symbol, mx.nd.NDArray)):
    return any(isinstance(value, kinds) or
               (isinstance(value, (list, tuple)) and _holds_array(value, kinds))
               for value in values)


def refuse_without_graph_form(function, args, kwargs):
    """Stop the trace if `function`, an np function with no symbol version, is given
    a symbol (without one it runs as it is: `np.array([1, 2])` is a constant)."""
    name = _WITHOUT_GRAPH_FORM.get(id(function))
    if name is not None and _holds_array(list(args) + list((kwargs or {}).values()),
                                         (mx.sym.Symbol,)):
        raise tracing.FallbackRequired("%s has no graph form (MXNet's numpy interface has no "
                                       "symbol version of it)" % name, user_location())


def is_numpy_type_check(value, types):
    """`isinstance(value, types)` for a traced np symbol: it stands for an np array."""
    return isinstance(value, NumpySymbol) and _is_array_type(mx.np.ndarray, types)


def _is_array_type(array_type, types):
    if isinstance(types, tuple):
        return any(_is_array_type(array_type, each) for each in types)
    return issubclass(array_type, types)
