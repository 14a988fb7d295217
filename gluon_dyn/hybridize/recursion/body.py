"""Tracing one node: a function's body, on Symbols, with its recursive calls cut out.

The function runs converted, once, on its arguments behind proxies
(structure.py); every array it reads becomes an input, every recursive call a
set of placeholder inputs typed by the callee's own body (the callee is matched
first: discovery.py). What the body returns is the graph's outputs. The trace
runs under a Rollback and must leave no Python state changed.

A recursive call may receive an array the function computed (the embedded
sentence, a state passed top-down): the body then runs in two stages, split
where its calls receive such arrays (passes.py, split.py).
"""
import dataclasses

import mxnet as mx
import numpy as np

from ...origin import user_location
from ..capturing import tracing
from ..capturing.capture import CapturedInput, ParameterInput
from ..capturing.python_state import Rollback, StateChanged, tensor_attributes
from .discovery import walk_subtree
from .output_type import OutputType, flatten, output_type
from .passes import Passed, PassShape, passed_of
from .split import split
from .structure import (NUMBER_TYPES, OBSERVED_TYPES, MethodProxy, Recorder, data_template,
                        describe, proxy_path)
from .unsupported import Unsupported

_MISSING = object()

# How a group of nodes gets an own input of its body: one row per node, stacked
# (the node's word); one array for the whole group (an array every node reads:
# the sentence, the nodes grouped by it); a row the down stage of a caller
# computed, gathered from its arena (passes.py).
STACKED, WHOLE, RECEIVED = "stacked", "whole", "received"


@dataclasses.dataclass(eq=False)
class CallSlot:
    callee: object       # functions.Function
    location: str        # "file:line" of the call
    output_type: OutputType


@dataclasses.dataclass(eq=False)
class DownStage:
    """What a body computes before its callees run (passes.py): `symbol`'s outputs
    are the arrays its calls receive, then values the up stage reads (`handoffs`:
    the up stage's variable name -> output index); `outputs` their (shape, dtype)."""
    symbol: mx.sym.Symbol
    outputs: list
    handoffs: dict


@dataclasses.dataclass(eq=False)
class Body:
    """A function's body compiled for one signature."""
    function: object         # functions.Function
    number: int
    signature: list          # (step, what it found), in order (signatures.py)
    symbol: mx.sym.Symbol    # the body's outputs (its up stage); inputs named below
    own_inputs: list         # variable names of the arrays the body read, in order
    data_inputs: set         # those of them made from numbers (Recorder.data)
    shapes: dict             # variable name -> shape, own inputs and placeholders
    slots: list              # CallSlot per recursive call, in call order
    placeholders: dict       # variable name -> (slot index, output index)
    sources: dict            # variable name -> ParameterInput or CapturedInput
    output_type: OutputType
    own_dtypes: list         # the dtype of each own input, in order
    kinds: list              # STACKED, WHOLE or RECEIVED, per own input
    received: dict           # own input index -> (function, shape, dtype) of a RECEIVED one
    down: DownStage          # None when no call receives an array the body computed
    entry: bool              # the forward: runs once per call
    open_dims: dict          # own input index -> its sizes the signature does not hold
    index_inputs: dict       # own input index -> the input (read whole) whose row it picks

    def describe(self):
        """The signature as the user would read it."""
        names = self.function.parameters
        parts = []
        for step, found in self.signature:
            if step[0] == "read":
                parts.append("%s: %s" % (describe(step[1], names), _finding(found)))
            elif step[0] == "index":
                parts.append("%s indexes array input %d: %s" % (
                    describe(step[1], names), step[2], found.__name__))
            elif step[0] == "shape":
                parts.append("%s.shape[%d]: %d" % (describe(step[1], names), step[2], found))
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
    if kind == "whole":
        return "array of rank %d %s" % (found[1], found[2].__name__)
    if kind == "passed":
        shape = "of rank %d" % found[2] if found[4] else str(found[2])
        return "array %s %s computed by %s" % (shape, found[3].__name__, found[1])
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
    if spec[0] == "computed":
        return "array %d computed here" % spec[1]
    if spec[0] == "sequence":
        return "%s(%s)" % (spec[1].__name__, ", ".join(_argument_text(s, names) for s in spec[2]))
    return repr(spec[1])


def trace_body(block, signatures, functions, function, args, number, entry):
    """The Body of `function(*args)` (`entry`: the forward, run once per call);
    extends nothing (the engine adds it to `signatures`). Raises
    FallbackRequired, discovery.Miss (a callee has no body yet) or what the
    user's code raises."""
    if tensor_attributes(block):
        raise Unsupported(
            "the block keeps arrays on itself (%s); the recursion engine does not take them as "
            "inputs" % ", ".join(sorted(tensor_attributes(block))), function.location)
    prefix = "%s_%s%d" % (block.prefix.rstrip("_") or "block", function.name, number)
    traced = _Trace(prefix, signatures, function, entry)
    saved = {}
    for callee in functions:
        saved[callee] = vars(callee.owner).get(callee.name, _MISSING)
        setattr(callee.owner, callee.name, traced.interceptor(callee))
    try:
        with Rollback(block, function.location) as rollback:
            with tracing.tracing(traced.trace):
                proxied = [traced.recorder.read((("arg", i),), lambda value=value: value)
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
    return traced.body(block, number, out)


class _RecursionTrace(tracing.Trace):
    """A Trace whose `recorder` makes the numbers of the data that index arrays
    inputs, and notes the sizes the body reads of arrays read whole."""
    recorder = None

    def indexed(self, target, key):
        return self.recorder.indexed(target, key)

    def _note_read(self, name, dims):
        super()._note_read(name, dims)
        self.recorder.note_shape_read(name, dims)


class _Trace:
    """One body's trace in progress: its Trace, the reads (Recorder), the
    recursive calls cut out, and the arrays it computed and passed to them."""

    def __init__(self, prefix, signatures, function, entry):
        self.prefix, self.signatures, self.function, self.entry = (prefix, signatures,
                                                                    function, entry)
        self.trace = _RecursionTrace(prefix, {}, ndarray_code=True)
        self.recorder = self.trace.recorder = Recorder(prefix, self.trace, function.location,
                                                       function.parameters)
        self.slots, self.placeholders, self.interceptors = [], {}, set()
        self.passes = []        # Symbols computed here that calls receive, in order
        self.passed = {}        # index in passes -> the Passed the callees' walks saw
        self.trace.call_handler = self.handle_call

    def interceptor(self, callee):
        def call(*call_args, **call_kwargs):
            where = user_location()
            bound = callee.bind(call_args, call_kwargs)
            specs = tuple(self.spec(value, where) for value in bound)
            real = tuple(self.real(value, spec) for value, spec in zip(bound, specs))
            returned = walk_subtree(self.signatures, callee, real, []).body.output_type
            slot = len(self.slots)
            self.slots.append(CallSlot(callee, where, returned))
            self.recorder.steps.append((("call", callee, specs), returned))
            values = []
            for index, (shape, _) in enumerate(returned.arrays):
                name = "%s_call%d_%d" % (self.prefix, slot, index)
                self.trace.shapes[name] = shape
                self.placeholders[name] = (slot, index)
                values.append(mx.sym.var(name))
            return returned.structure(values)
        self.interceptors.add(call)
        return call

    def handle_call(self, f, args, kwargs):
        """Calls the trace handles itself: the recursive calls, methods of the
        structure's objects (run on the real object, their result read), and
        `mx.nd.array(...)` of numbers read from the arguments (an input per node)."""
        if isinstance(f, MethodProxy) or f in self.interceptors:
            return f(*args, **(kwargs or {}))
        if f is not mx.nd.array:
            return NotImplemented
        bound = dict(zip(("source_array", "ctx", "dtype"), args), **(kwargs or {}))
        template = data_template(bound.get("source_array"))
        if template is None:
            return NotImplemented
        real = self.real(bound["source_array"], None)
        return self.recorder.data(template, real, bound.get("dtype") or mx.base.mx_real_t)

    def spec(self, value, where):
        """How a recursive call's argument is got from the caller's arguments."""
        path = proxy_path(value)
        if path is not None:
            return ("path", path)
        if isinstance(value, mx.sym.Symbol):
            for index, (variable, _) in enumerate(self.recorder.arrays):
                if variable is value:
                    return ("input", index)
            return self._computed(value, where)
        if isinstance(value, OBSERVED_TYPES + NUMBER_TYPES):
            return ("value", value)
        if isinstance(value, (list, tuple)):
            return ("sequence", type(value), tuple(self.spec(item, where) for item in value))
        raise Unsupported(
            "a recursive call receives a %s made by its caller, not read from the arguments"
            % type(value).__name__, where)

    def _computed(self, symbol, where):
        """("computed", index, shape, dtype, shared): an array this body computes
        and a call receives, an output of its down stage."""
        if set(symbol.list_inputs()) & set(self.placeholders):
            raise Unsupported(
                "a recursive call receives an array computed from what another recursive call "
                "returned: the recursion engine runs the calls of a node together", where)
        index = next((k for k, known in enumerate(self.passes)
                      if known.handle.value == symbol.handle.value), len(self.passes))
        if index == len(self.passes):
            self.passes.append(symbol)
        try:
            shape = self.trace.inferred_shape(symbol)
        except AttributeError as error:
            raise Unsupported("a recursive call receives an array whose shape is not known "
                              "while tracing (%s)" % error, where) from None
        if not self.entry and shape[:1] != (1,):
            raise Unsupported(
                "a recursive call receives an array of shape %s computed by its caller: the "
                "recursion engine keeps arrays a recursive function computes as rows, each "
                "with a leading axis of size 1" % (shape,), where)
        if self.entry:   # its shape follows the sizes of the entry's arrays
            shape = self._pass_shape(symbol)
        return ("computed", index, shape, self._dtype(symbol, where), self.entry)

    def _pass_shape(self, symbol):
        own = {variable.name: index for index, (variable, _) in enumerate(self.recorder.arrays)}
        inputs = symbol.list_inputs()
        fixed = {name: shape for name, shape in self.trace.shapes.items()
                 if name in inputs and name not in own}
        return PassShape(symbol, {name: own[name] for name in inputs if name in own}, fixed)

    def _dtype(self, symbol, where):
        known = self._input_dtypes()
        _, dtypes, _ = symbol.infer_type_partial(
            **{name: dtype for name, dtype in known.items() if name in symbol.list_inputs()})
        if dtypes[0] is None:
            raise Unsupported("a recursive call receives an array whose dtype is not known "
                              "while tracing", where)
        return np.dtype(dtypes[0]).type

    def _input_dtypes(self):
        dtypes = {variable.name: np.dtype(array.dtype).type
                  for variable, array in self.recorder.arrays}
        dtypes.update((name, self.slots[slot].output_type.arrays[index][1])
                      for name, (slot, index) in self.placeholders.items())
        dtypes.update((var.name, array.dtype) for var, array in self.trace.captured.values())
        return dtypes

    def real(self, value, spec):
        """The value a call's argument has at trace time (`spec`: how it is got)."""
        if spec is not None and spec[0] == "computed":
            return passed_of(self.passed, spec, self.function,
                             [real for _, real in self.recorder.arrays])
        path = proxy_path(value)
        if path is not None:
            return self.recorder.real(path)
        if isinstance(value, mx.sym.Symbol):
            return next(array for variable, array in self.recorder.arrays if variable is value)
        if isinstance(value, (list, tuple)):
            specs = spec[2] if spec is not None and spec[0] == "sequence" else [None] * len(value)
            return type(value)(self.real(item, s) for item, s in zip(value, specs))
        return value

    def body(self, block, number, out):
        function, recorder, trace = self.function, self.recorder, self.trace
        layout, outputs = flatten(out, function)
        shapes = self._shapes(outputs)
        if self.passes:
            symbol, down_symbol, handoffs = split(outputs, self.passes, self.prefix)
            down = DownStage(down_symbol, self._stage_outputs(down_symbol), handoffs)
            if not self.entry:
                for shape, _ in down.outputs:
                    if shape[:1] != (1,):
                        raise Unsupported(
                            "%s computes a value of shape %s both for the arrays its calls "
                            "receive and for what it returns: the recursion engine hands such "
                            "values on as rows, each with a leading axis of size 1"
                            % (function, shape), function.location)
            for name, index in handoffs.items():
                trace.shapes[name] = down.outputs[index][0]
        else:
            symbol, down, handoffs = mx.sym.Group(outputs), None, {}
        if not self.entry:
            self._key_sizes_results_follow(list(symbol) + (list(down.symbol) if down else []))
        # An output that is an input as it came must be a node of the graph.
        symbol = mx.sym.Group([mx.sym.identity(o) if o.get_children() is None else o
                               for o in symbol])
        dtypes = self._input_dtypes()
        dtypes.update((name, down.outputs[index][1]) for name, index in handoffs.items())
        sources = _sources(block, trace, function, [symbol] + ([down.symbol] if down else []),
                           dtypes)
        _, out_dtypes, _ = symbol.infer_type_partial(
            **{name: dtype for name, dtype in dtypes.items() if name in symbol.list_inputs()})
        if any(dtype is None for dtype in out_dtypes):
            raise Unsupported("the dtype of what %s returns is not known while tracing"
                              % function, function.location)
        own = [variable.name for variable, _ in recorder.arrays]
        kinds, received = [], {}
        for index, (_, real) in enumerate(recorder.arrays):
            kinds.append(_kind(real))
            if kinds[-1] == RECEIVED:
                received[index] = (real.function, real.shape, real.dtype)
        names = own + list(self.placeholders) + list(handoffs)
        return Body(function, number, list(recorder.steps), symbol, own,
                    set(recorder.data_inputs), {name: trace.shapes[name] for name in names},
                    self.slots, self.placeholders, sources,
                    output_type(layout, zip(shapes, [np.dtype(d).type for d in out_dtypes])),
                    [dtypes[name] for name in own], kinds, received, down, self.entry,
                    self._open_dims(own), dict(recorder.index_inputs))

    def _key_sizes_results_follow(self, symbols):
        """Puts in the signature each size of an array read whole that the shape of
        a result (or of an array handed on) follows: results are rows of fixed
        shapes. A size is changed and the shapes inferred again."""
        group = mx.sym.Group(symbols)
        needed = set(group.list_inputs())
        known = {name: shape for name, shape in self.trace.shapes.items() if name in needed}
        expected = _inferred(group, known)
        for name, dim in self.recorder.open_dims():
            if name in known:
                changed = list(known[name])
                changed[dim] += 3
                if _inferred(group, dict(known, **{name: tuple(changed)})) != expected:
                    self.recorder.note_shape_read(name, [dim])

    def _open_dims(self, own):
        found = {}
        for name, dim in self.recorder.open_dims():
            found.setdefault(own.index(name), []).append(dim)
        return found

    def _shapes(self, symbols):
        try:
            return [self.trace.inferred_shape(symbol) for symbol in symbols]
        except AttributeError as error:
            raise Unsupported("the shape of what %s computes is not known while tracing (%s)"
                              % (self.function, error), self.function.location) from None

    def _stage_outputs(self, symbol):
        dtypes = self._input_dtypes()
        _, found, _ = symbol.infer_type_partial(
            **{name: dtype for name, dtype in dtypes.items() if name in symbol.list_inputs()})
        return [(shape, np.dtype(dtype).type)
                for shape, dtype in zip(self._shapes(list(symbol)), found)]


def _inferred(symbol, shapes):
    try:
        return symbol.infer_shape_partial(**shapes)[1]
    except mx.base.MXNetError:
        return None


def _kind(real):
    """How a group gets an own input whose value at trace time was `real`: numbers
    made into array data differ per node, arrays read from the Python data too
    unless they have no leading axis of 1 to stack them on."""
    if isinstance(real, Passed):
        return WHOLE if real.shared else RECEIVED
    if isinstance(real, np.ndarray) or real.shape[:1] == (1,):
        return STACKED
    return WHOLE


def _sources(block, trace, function, symbols, dtypes):
    """{input name: ParameterInput or CapturedInput} of `symbols`' inputs that are
    not the body's own (their dtypes added to `dtypes`)."""
    params = {p.name: p for p in block.collect_params().values()}
    captured = {var.name: array for var, array in trace.captured.values()}
    sources = {}
    for symbol in symbols:
        for name in symbol.list_inputs():
            if name in params:
                sources[name] = ParameterInput(params[name])
                dtypes[name] = params[name].dtype
            elif name in captured:
                sources[name] = CapturedInput(captured[name])
                dtypes[name] = captured[name].dtype
            elif name not in dtypes:
                raise Unsupported(
                    "a value computed inside a graph loop or branch is used outside it; graph "
                    "input %r" % name, function.location)
    return sources
