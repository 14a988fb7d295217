"""Function calls in converted code, while a forward is traced on Symbols.

Code written for NDArrays calls `mx.nd.*` functions; traced, their arguments are
Symbols, so each call goes to the `mx.sym` function of the same name (MXNet's
control-flow functions go to gluon_dyn.ops, which have the same signatures).
NDArrays met there (constants, arrays from outside) become graph inputs. A call
a graph cannot replay, such as `print`, stops the trace: that code runs as Python.
"""
import mxnet as mx
from malt.operators import variables
from mxnet import gluon

from .... import ops
from ...capturing import deferred_init, effects, host_data, host_values, symbolic_shapes, tracing
from ....origin import caller_location
from .. import malt_decisions
from . import builtins, consumers, ndarray_functions, numpy_calls
from ...capturing.symbolic_shapes import SymbolicDim
from .loops import TensorRange

_NAMESPACES = [(mx.nd, mx.sym), (mx.nd.contrib, mx.sym.contrib), (mx.nd.random, mx.sym.random),
               (mx.nd.linalg, mx.sym.linalg), (mx.nd.op, mx.sym.op), (mx.nd.sparse, mx.sym.sparse)]
_CONTROL_FLOW = {"foreach": ops.foreach, "while_loop": ops.while_loop, "cond": ops.cond}
_symbolic = {}
for _nd_namespace, _sym_namespace in _NAMESPACES:
    for _name in dir(_nd_namespace):
        _function = getattr(_nd_namespace, _name)
        if callable(_function) and not isinstance(_function, type) and hasattr(_sym_namespace, _name):
            _symbolic[id(_function)] = getattr(_sym_namespace, _name)
for _name, _function in _CONTROL_FLOW.items():
    _symbolic[id(getattr(mx.nd.contrib, _name))] = _function
_symbolic.update(numpy_calls.SYMBOLIC)   # mx.np.* and mx.npx.* (MXNet's numpy interface)
_symbolic.update(ndarray_functions.SYMBOLIC)   # mx.nd.add, ...: Python helpers mx.sym lacks

_UNREPLAYABLE = {id(print): "print() must run on every call"}


def _refuse_while_tracing(function):
    def guarded(*args, **kwargs):
        if tracing.current() is not None:
            raise tracing.FallbackRequired(_UNREPLAYABLE[id(function)], caller_location(),
                                           breakable=True)
        return function(*args, **kwargs)
    return guarded


_GUARDED = {id(function): _refuse_while_tracing(function) for function in (print,)}


def ld(value):
    """Variable load; malt leaves builtins such as `print` as plain loads, not calls.
    Every variable read of converted code runs this: malt's own `ld` inlined."""
    if isinstance(value, variables.Undefined):
        return value.read()
    return _GUARDED.get(id(value), value)


def _as_symbol(value, trace):
    return trace.capture(value) if isinstance(value, mx.nd.NDArray) else value


_APPENDS = {"append", "extend"}   # kept in the graph under tensor control flow (effects.py)
_MUTATORS = {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault",
             "add", "discard", "popitem", "sort", "reverse", "__setitem__", "__delitem__"}


def converted_call(f, args, kwargs, caller_fn_scope=None, options=None):
    if f is range and any(isinstance(a, (mx.sym.Symbol, SymbolicDim)) for a in args):
        return TensorRange(*[a.graph_value() if isinstance(a, SymbolicDim) else a for a in args])
    trace = tracing.current()
    if trace is not None and trace.modules_read is not None:
        trace.modules_read.note(f)   # its module's values are part of the key
    if trace is not None and host_values.passed(args, kwargs):
        handled = host_values.call(f, args, kwargs)   # int(x.asscalar()), ...
        if handled is not NotImplemented:
            return handled
    if trace is not None and builtins.applies(f, args, trace):
        return builtins.call(f, args, kwargs)   # len(seq), enumerate(seq), ...: rows
    if trace is not None and trace.call_handler is not None:
        handled = trace.call_handler(f, args, kwargs)
        if handled is not NotImplemented:
            return handled
    if trace is not None and trace.staging and _mutates_container(f):
        if not (isinstance(f.__self__, list) and f.__name__ in _APPENDS and trace.effect_frames):
            raise tracing.FallbackRequired(
                "`%s.%s` inside a branch or loop on a tensor: a Python side effect that depends "
                "on a tensor" % (type(f.__self__).__name__, f.__name__), caller_location())
        effects.note_append(f.__self__)
    if trace is not None:
        if f is isinstance and trace.ndarray_code and isinstance(args[0], mx.sym.Symbol):
            return _as_array_isinstance(args[1]) or numpy_calls.is_numpy_type_check(*args)
        if isinstance(f, gluon.Block):
            deferred_init.initialize_before_call(f, args)
        if id(f) in _UNREPLAYABLE:
            raise tracing.FallbackRequired(_UNREPLAYABLE[id(f)], caller_location(), breakable=True)
        host_data.check_call(f, args, kwargs)
        if numpy_calls.runs_as_constant(f, args, kwargs):
            return f(*args, **(kwargs or {}))
        numpy_calls.refuse_without_graph_form(f, args, kwargs)
        if id(f) in _symbolic:
            f = _symbolic[id(f)]
            args, kwargs = _captured(args, kwargs, trace)
        if consumers.holds_markers(args):
            return consumers.consume(f, args, kwargs)
        if symbolic_shapes.holds_dims(list(args) + list((kwargs or {}).values())):
            return symbolic_shapes.call_with_dims(f, args, kwargs)
        elif trace.ndarray_code and _has_symbol(list(args) + list((kwargs or {}).values())):
            # Mixing arrays made outside converted code (a cell's begin_state) with
            # traced values: the arrays become graph inputs. They are functions of the
            # values the graph is keyed on, so they are the same on every call.
            args, kwargs = _captured(args, kwargs, trace)
    return malt_decisions.converted_call(f, args, kwargs, caller_fn_scope, options)


def _as_array_isinstance(types):
    """`isinstance(value, types)` in code written for NDArrays, for a traced value: it
    stands for an NDArray, so the code takes the path it takes imperatively."""
    if isinstance(types, tuple):
        return any(_as_array_isinstance(each) for each in types)
    return issubclass(mx.nd.NDArray, types)


def _mutates_container(f):
    owner = getattr(f, "__self__", None)
    return isinstance(owner, (list, dict, set)) and getattr(f, "__name__", "") in _MUTATORS


def _has_symbol(values):
    return any(isinstance(v, mx.sym.Symbol) or (isinstance(v, (list, tuple)) and _has_symbol(v))
               for v in values)


def _captured(args, kwargs, trace):
    return (tuple(_captured_value(a, trace) for a in args),
            {k: _captured_value(v, trace) for k, v in (kwargs or {}).items()} or None)


def _captured_value(value, trace):
    if isinstance(value, (list, tuple)):
        items = [_captured_value(v, trace) for v in value]
        if hasattr(value, "_fields"):     # a named tuple
            return type(value)(*items)
        # A shape read while tracing (tracing.ReadShape) is a plain tuple to operators.
        return list(items) if isinstance(value, list) else tuple(items)
    return _as_symbol(value, trace)
