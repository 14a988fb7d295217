"""NDArray's attributes and methods on Symbols, while a forward is traced.

Code written for NDArrays reads `x.T`, `x.dtype`, `x.size`, `x.context`, and calls
`x.astype(t)`, `x.copy()`, `x.as_in_context(ctx)`, `x.reshape(2, -1)`; traced, `x`
is a Symbol, which lacks these or means something else by them (Symbol.reshape
takes no shape as positional ints, Symbol.copy raises). patches.py puts these on
Symbol: while a trace is in progress they answer as the NDArray the Symbol stands
for would; outside one, Symbol's own (or its AttributeError).

- `dtype` is MXNet's type inference over the trace's input dtypes; `size`, like
  `shape`, specialises the graph to the input shapes; `context` and `ctx` are the
  context the graph runs on (that of the call's arrays); `stype` is "default";
- `T`, `astype(dtype, copy=False)`, `as_in_context` to the graph's context return
  the array itself where NDArray does, so the result is the same array (aliases.py);
  `reshape` gives a view of the array, as NDArray's does;
- `copyto` an array, `slice_assign` and `slice_assign_scalar` assign in place as
  item assignment does (item_assignment.py);
- what a graph cannot do, it refuses naming the line: moving an array to another
  context, reading `.grad`, `attach_grad()`, `backward()`.

The np symbols of MXNet's numpy interface define `T`, `astype` and `reshape` their
own way; the rest they inherit from here (`dtype` as a NumPy dtype, as np arrays
give it; `as_in_ctx`, which only np arrays have).
"""
import functools

import mxnet as mx
import numpy as np

from ....origin import user_location
from ...capturing import tracing
from ...capturing.arguments import graph_context
from ...capturing.numpy_interface import is_numpy_symbol
from . import aliases
from .item_assignment import set_item


def context_of_graph():
    """The context the graph being traced runs on."""
    return tracing.current().context or graph_context(mx.current_context())


def _traced(name, original=None):
    """A method or property of Symbol for name `name`: the function below while
    tracing; outside a trace `original` (Symbol's own), or AttributeError."""
    def decorate(function):
        @functools.wraps(function)
        def method(symbol, *args, **kwargs):
            if tracing.current() is not None:
                return function(symbol, *args, **kwargs)
            if original is None:
                raise AttributeError("'%s' object has no attribute '%s'"
                                     % (type(symbol).__name__, name))
            return original(symbol, *args, **kwargs)
        return method
    return decorate


def _property(name):
    def decorate(function):
        return property(_traced(name)(function))
    return decorate


@_property("T")
def transpose(symbol):
    if len(tracing.current().shape_of(symbol)) < 2:
        return symbol
    return mx.sym.transpose(symbol)


@_property("dtype")
def dtype(symbol):
    found = tracing.dtype_of(symbol)
    return np.dtype(found) if is_numpy_symbol(symbol) else found


@_property("size")
def size(symbol):
    total = 1
    for dim in tracing.current().shape_of(symbol):
        total *= dim
    return total


@_property("context")
def context(symbol):
    return context_of_graph()


@_property("ctx")
def ctx(symbol):
    return context_of_graph()


@_property("stype")
def stype(symbol):
    return "default"


@_property("writable")
def writable(symbol):
    return True


@_property("grad")
def grad(symbol):
    raise tracing.FallbackRequired("`.grad` reads the gradient buffer of an array into Python",
                                   user_location(), breakable=True)


def check_graph_context(context, what):
    """`what` makes or moves an array to `context`: the graph's, or a refusal."""
    if graph_context(context) != context_of_graph():
        raise tracing.FallbackRequired(
            "%s moves an array to %s, but the graph runs on %s" % (what, context,
                                                                    context_of_graph()),
            user_location())


def as_in_context(original):
    @_traced("as_in_context", original)
    def method(symbol, context):
        check_graph_context(context, "as_in_context")
        return symbol
    return method


def as_in_ctx(symbol):
    """`as_in_ctx`, which np arrays have and legacy NDArrays do not."""
    if not is_numpy_symbol(symbol) or tracing.current() is None:
        raise AttributeError("'%s' object has no attribute 'as_in_ctx'" % type(symbol).__name__)

    def method(context):
        check_graph_context(context, "as_in_ctx")
        return symbol
    return method


def copy(original):
    @_traced("copy", original)
    def method(symbol):
        return mx.sym.identity(symbol)
    return method


@_traced("copyto")
def copyto(symbol, other):
    if isinstance(other, mx.Context):
        check_graph_context(other, "copyto")
        return mx.sym.identity(symbol)
    set_item(other, slice(None), symbol, "it is the destination of copyto()")
    return other


def astype(original):
    @_traced("astype", original)
    def method(symbol, dtype, copy=True):    # pylint: disable=redefined-outer-name
        if not copy and np.dtype(dtype) == np.dtype(tracing.dtype_of(symbol)):
            return symbol
        return mx.sym.cast(symbol, dtype=np.dtype(dtype).name)
    return method


def reshape(original):
    """NDArray.reshape(*shape, **kwargs): a shape as one tuple or as ints, `reverse`;
    the result views the array's memory (aliases.py)."""
    @_traced("reshape", original)
    def method(symbol, *shape, **kwargs):
        if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
            shape = shape[0]
        elif not shape:
            shape = kwargs.pop("shape", None)
        reverse = kwargs.pop("reverse", False)
        if kwargs:
            raise TypeError("Got unknown keywords in reshape: %s. Accepted keyword arguments "
                            "are 'shape' and 'reverse'." % ", ".join(kwargs))
        result = original(symbol, shape=tuple(shape), reverse=reverse)
        if tracing.current().ndarray_code:
            # The base's shape is read only if the view is assigned into: reading it
            # here would specialise every graph that reshapes to its input shapes.
            aliases.note_view(
                result, symbol, lambda base: original(base, shape=tuple(shape), reverse=reverse),
                lambda base, value: mx.sym.reshape(value,
                                                   shape=tuple(tracing.static_shape(base))))
        return result
    return method


def broadcast_to(original):
    """NDArray.broadcast_to: a shape of more axes adds leading axes of length 1."""
    @_traced("broadcast_to", original)
    def method(symbol, shape):
        own = tuple(tracing.current().shape_of(symbol))
        if len(shape) > len(own):
            symbol = mx.sym.reshape(symbol, shape=(1,) * (len(shape) - len(own)) + own)
        return original(symbol, shape=tuple(shape))
    return method


@_traced("broadcast_like")
def broadcast_like(symbol, other):
    return symbol.broadcast_to(tracing.current().shape_of(other))


def _in_place(name):
    """NDArray's in-place methods (`slice_assign`, `slice_assign_scalar`): item
    assignment of a slice."""
    @_traced(name)
    def method(symbol, value, begin, end, step=()):
        step = tuple(step) or (None,) * len(begin)
        key = tuple(slice(b, e, s) for b, e, s in zip(begin, end, step))
        return set_item(symbol, key, value, "it is assigned into by %s()" % name)
    return method


def _refused(name, why, original=None):
    @_traced(name, original)
    def method(symbol, *args, **kwargs):
        raise tracing.FallbackRequired("`%s()` %s" % (name, why), user_location(),
                                       breakable=True)
    return method


def parameter_data(data):
    """Gluon's Parameter.data: while tracing, a parameter of the graph's block is its
    graph input (as a HybridBlock's `F` code gets it), so that what the code computes
    from it (`self.transitions.data()[tag]`) is part of the graph rather than a
    constant computed from its values when the trace ran."""
    @functools.wraps(data)
    def data_or_input(parameter, ctx=None):
        trace = tracing.current()
        if trace is None or parameter.name not in trace.shapes:
            return data(parameter, ctx)
        if ctx is not None:
            check_graph_context(ctx, "Parameter.data")
        return parameter.var()
    return data_or_input


def get_item(original):
    """`x[rows, columns]` by index arrays in code written for NDArrays that a trace runs
    on Symbols (a child HybridBlock's hybrid_forward run as written: GluonNLP's
    sampler reads `log_probs[mx.nd.arange(n), ids]`): NDArray's advanced indexing,
    gather_nd of the index arrays stacked as int32, as NDArray.__getitem__ does. Any
    other key keeps Symbol's meaning (an int selects an output)."""
    @functools.wraps(original)
    def method(symbol, key):
        parts = _index_arrays(key) if tracing.current() is not None else None
        if parts is None:
            return original(symbol, key)
        return mx.sym.gather_nd(symbol, mx.sym.stack(*parts, axis=0))
    return method


def _index_arrays(key):
    """The parts of `key` as int32 Symbols, if it is a tuple of one-dimensional index
    arrays (NDArrays, Symbols) of one length; else None."""
    if not isinstance(key, tuple) or len(key) < 2 or \
            not all(isinstance(part, (mx.nd.NDArray, mx.sym.Symbol)) for part in key):
        return None
    trace = tracing.current()
    shapes = set()
    for part in key:
        try:
            shapes.add(tuple(part.shape if isinstance(part, mx.nd.NDArray) else
                             trace.static_shape(part)))
        except AttributeError:    # known only when the graph runs
            return None
    if len(shapes) != 1 or len(shapes.pop()) != 1:
        return None
    return [mx.sym.cast(trace.capture(part) if isinstance(part, mx.nd.NDArray) else part,
                        dtype="int32") for part in key]


def symbol_attributes():
    """{name: what Symbol gets for it} (patches.py installs them)."""
    own = mx.sym.Symbol
    return {
        "T": transpose, "dtype": dtype, "size": size, "context": context, "ctx": ctx,
        "stype": stype, "writable": writable, "grad": grad,
        "as_in_context": as_in_context(own.as_in_context), "as_in_ctx": property(as_in_ctx),
        "copy": copy(own.copy), "copyto": copyto, "astype": astype(own.astype),
        "reshape": reshape(own.reshape), "broadcast_to": broadcast_to(own.broadcast_to),
        "broadcast_like": broadcast_like, "__getitem__": get_item(own.__getitem__),
        "slice_assign": _in_place("slice_assign"),
        "slice_assign_scalar": _in_place("slice_assign_scalar"),
        "attach_grad": _refused("attach_grad", "marks an array for gradients, in Python"),
        "backward": _refused("backward", "runs autograd's backward, in Python", own.backward),
    }
