"""Tracing one node: a function's body, on Symbols, with its recursive calls cut out.

The function runs converted, once, on its arguments behind proxies
(structure.py); every array it reads becomes an input, every recursive call a
set of placeholder inputs typed by the callee's own body (the callee is matched
first: discovery.py). What the body returns is the graph's outputs. The trace
runs under a Rollback and must leave no Python state changed.
"""
import dataclasses

import mxnet as mx
import numpy as np

from ...origin import user_location
from .. import tracing
from ..capture import CapturedInput, ParameterInput
from ..python_state import Rollback, StateChanged, tensor_attributes
from .discovery import walk_subtree
from .structure import (NUMBER_TYPES, OBSERVED_TYPES, MethodProxy, Recorder, data_template,
                        describe, proxy_path)
from .unsupported import Unsupported

_MISSING = object()
_OUTPUT_TYPES = {}   # OutputType -> the one equal OutputType in use


@dataclasses.dataclass(frozen=True)
class OutputType:
    """What a body returns: one array (container None) or a tuple/list of them,
    with each array's shape and dtype. Part of every caller's signature."""
    container: type
    arrays: tuple   # ((shape, dtype), ...)

    def structure(self, values):
        return values[0] if self.container is None else self.container(values)

    def __str__(self):
        text = ", ".join("%s %s" % (shape, dtype.__name__) for shape, dtype in self.arrays)
        return text if self.container is None else "(%s)" % text


@dataclasses.dataclass(eq=False)
class CallSlot:
    callee: object       # functions.Function
    location: str        # "file:line" of the call
    output_type: OutputType


@dataclasses.dataclass(eq=False)
class Body:
    """A function's body compiled for one signature."""
    function: object         # functions.Function
    number: int
    signature: list          # (step, what it found), in order (signatures.py)
    symbol: mx.sym.Symbol    # the body's outputs; inputs named below
    own_inputs: list         # variable names of the arrays the body read, in order
    data_inputs: set         # those of them made from numbers (Recorder.data)
    shapes: dict             # variable name -> shape, own inputs and placeholders
    slots: list              # CallSlot per recursive call, in call order
    placeholders: dict       # variable name -> (slot index, output index)
    sources: dict            # variable name -> ParameterInput or CapturedInput
    output_type: OutputType
    own_dtypes: list         # the dtype of each own input, in order

    def describe(self):
        """The signature as the user would read it."""
        names = self.function.parameters
        parts = []
        for step, found in self.signature:
            if step[0] == "read":
                parts.append("%s: %s" % (describe(step[1], names), _finding(found)))
            elif step[0] == "data":
                parts.append("array data from %s" % _argument_text(step[1], names))
            else:
                parts.append("%s(%s) -> %s" % (step[1].name, ", ".join(
                    _argument_text(spec, names) for spec in step[2]), found))
        return "; ".join(parts)


def _finding(found):
    kind = found[0]
    if kind == "array":
        return "array %s %s" % (found[1], found[2].__name__)
    if kind == "value":
        return repr(found[2])
    if kind == "sequence":
        return "%s of %d" % (found[1].__name__, found[2])
    if kind == "dict":
        return "dict with keys %s" % (list(found[2]),)
    if kind == "raises":
        return "raises %s" % found[1].__name__
    return "%s %s" % (kind, getattr(found[1], "__qualname__", found[1]))


def _argument_text(spec, names):
    if spec[0] == "path":
        return describe(spec[1], names)
    if spec[0] == "input":
        return "array input %d" % spec[1]
    if spec[0] == "sequence":
        return "%s(%s)" % (spec[1].__name__, ", ".join(_argument_text(s, names) for s in spec[2]))
    return repr(spec[1])


def trace_body(block, signatures, functions, function, args, number):
    """The Body of `function(*args)`; extends nothing (the engine adds it to
    `signatures`). Raises FallbackRequired, discovery.Miss (a callee has no body
    yet) or what the user's code raises."""
    if tensor_attributes(block):
        raise Unsupported(
            "the block keeps arrays on itself (%s); the recursion engine does not take them as "
            "inputs" % ", ".join(sorted(tensor_attributes(block))), function.location)
    prefix = "%s_%s%d" % (block.prefix.rstrip("_") or "block", function.name, number)
    trace = tracing.Trace(prefix, {}, ndarray_code=True)
    recorder = Recorder(prefix, trace, function.location, function.parameters)
    slots, placeholders, interceptors = [], {}, set()
    trace.call_handler = lambda f, args, kwargs: _handle_call(recorder, interceptors, f, args,
                                                              kwargs)

    def intercept(callee):
        def call(*call_args, **call_kwargs):
            where = user_location()
            bound = callee.bind(call_args, call_kwargs)
            specs = tuple(_spec(recorder, value, where) for value in bound)
            real = tuple(_real(recorder, value) for value in bound)
            output_type = walk_subtree(signatures, callee, real, []).body.output_type
            slot = len(slots)
            slots.append(CallSlot(callee, where, output_type))
            recorder.steps.append((("call", callee, specs), output_type))
            values = []
            for index, (shape, _) in enumerate(output_type.arrays):
                name = "%s_call%d_%d" % (prefix, slot, index)
                trace.shapes[name] = shape
                placeholders[name] = (slot, index)
                values.append(mx.sym.var(name))
            return output_type.structure(values)
        return call

    saved = {}
    for callee in functions:
        saved[callee] = vars(callee.owner).get(callee.name, _MISSING)
        interceptor = intercept(callee)
        interceptors.add(interceptor)
        setattr(callee.owner, callee.name, interceptor)
    try:
        with Rollback(block, function.location) as rollback:
            with tracing.tracing(trace):
                proxied = [recorder.read((("arg", i),), lambda value=value: value)
                           for i, value in enumerate(args)]
                out = function.converted(*proxied)
            if tensor_attributes(block):
                raise Unsupported("the recursion keeps arrays on the block (%s)" % (
                    ", ".join(sorted(tensor_attributes(block)))), function.location)
            try:
                rollback.keep_graph_state()
            except StateChanged as change:
                raise Unsupported("%s: state kept on the block is not an input of compiled "
                                  "bodies" % change, function.location) from None
    finally:
        for callee, value in saved.items():
            if value is _MISSING:
                delattr(callee.owner, callee.name)
            else:
                setattr(callee.owner, callee.name, value)
    return _body(block, function, number, recorder, trace, slots, placeholders, out)


def _handle_call(recorder, interceptors, f, args, kwargs):
    """Calls the trace handles itself: the recursive calls, methods of the
    structure's objects (run on the real object, their result read), and
    `mx.nd.array(...)` of numbers read from the arguments (an input per node)."""
    if isinstance(f, MethodProxy) or f in interceptors:
        return f(*args, **(kwargs or {}))
    if f is not mx.nd.array:
        return NotImplemented
    bound = dict(zip(("source_array", "ctx", "dtype"), args), **(kwargs or {}))
    template = data_template(bound.get("source_array"))
    if template is None:
        return NotImplemented
    real = _real(recorder, bound["source_array"])
    return recorder.data(template, real, bound.get("dtype") or mx.base.mx_real_t)


def _spec(recorder, value, where):
    """How a recursive call's argument is got from the caller's arguments."""
    path = proxy_path(value)
    if path is not None:
        return ("path", path)
    if isinstance(value, mx.sym.Symbol):
        for index, (variable, _) in enumerate(recorder.arrays):
            if variable is value:
                return ("input", index)
        raise Unsupported(
            "a recursive call receives an array computed by its caller (information flowing "
            "down the recursion): the recursion engine runs callees before their callers", where)
    if isinstance(value, OBSERVED_TYPES + NUMBER_TYPES):
        return ("value", value)
    if isinstance(value, (list, tuple)):
        return ("sequence", type(value), tuple(_spec(recorder, item, where) for item in value))
    raise Unsupported(
        "a recursive call receives a %s made by its caller, not read from the arguments"
        % type(value).__name__, where)


def _real(recorder, value):
    path = proxy_path(value)
    if path is not None:
        return recorder.real(path)
    if isinstance(value, mx.sym.Symbol):
        return next(array for variable, array in recorder.arrays if variable is value)
    if isinstance(value, (list, tuple)):
        return type(value)(_real(recorder, item) for item in value)
    return value


def _body(block, function, number, recorder, trace, slots, placeholders, out):
    if isinstance(out, mx.sym.Symbol):
        outputs, container = [out], None
    elif isinstance(out, (list, tuple)) and out and all(isinstance(o, mx.sym.Symbol) for o in out):
        outputs, container = list(out), type(out)
    else:
        raise Unsupported("%s returns %s, not arrays" % (
            function, type(out).__name__), function.location)
    # An output that is an input as it came must be a node of the graph.
    symbol = mx.sym.Group([mx.sym.identity(o) if o.get_children() is None else o
                           for o in outputs])
    params = {p.name: p for p in block.collect_params().values()}
    captured = {var.name: array for var, array in trace.captured.values()}
    own = [variable.name for variable, _ in recorder.arrays]
    dtypes = {variable.name: np.dtype(array.dtype).type for variable, array in recorder.arrays}
    dtypes.update((name, slots[slot].output_type.arrays[index][1])
                  for name, (slot, index) in placeholders.items())
    sources = {}
    for name in symbol.list_inputs():
        if name in params:
            sources[name] = ParameterInput(params[name])
            dtypes[name] = params[name].dtype
        elif name in captured:
            sources[name] = CapturedInput(captured[name])
            dtypes[name] = captured[name].dtype
        elif name not in dtypes:
            raise Unsupported(
                "a value computed inside a graph loop or branch is used outside it; graph input "
                "%r" % name, function.location)
    try:
        shapes = [trace.inferred_shape(o) for o in outputs]
        _, out_dtypes, _ = symbol.infer_type_partial(
            **{name: dtype for name, dtype in dtypes.items() if name in symbol.list_inputs()})
    except AttributeError as error:
        raise Unsupported("the shape of what %s returns is not known while tracing "
                                       "(%s)" % (function, error), function.location)
    if any(dtype is None for dtype in out_dtypes):
        raise Unsupported("the dtype of what %s returns is not known while tracing"
                                       % function, function.location)
    output_type = OutputType(container, tuple(zip(shapes, out_dtypes)))
    # One object per type: matching compares a callee's type with the one traced
    # by identity first (compiled_walk.py).
    output_type = _OUTPUT_TYPES.setdefault(output_type, output_type)
    shapes_by_name = {name: trace.shapes[name] for name in own + list(placeholders)}
    return Body(function, number, list(recorder.steps), symbol, own, set(recorder.data_inputs),
                shapes_by_name, slots, placeholders, sources, output_type,
                [dtypes[name] for name in own])
