"""Stage 2 of a call: tracing the converted forward on Symbols into a Capture.

A Capture is one graph and what it needs: where each graph input comes from (an
argument array, an array kept on a block, a parameter, an array captured from
outside), how many outputs are the forward's and which attributes the rest are
written back to, and the guards whose results form the last output. Tracing runs
the user's code once: a Rollback leaves the blocks' Python state as it found it.
"""
import dataclasses
import typing

import mxnet as mx

from . import arguments, guards, tracing
from .python_state import (NUMBER_TYPES, NumbersChanged, Rollback, as_list, block_tree, like,
                           owner_of, tensor_attributes)


@dataclasses.dataclass(frozen=True)
class ArgumentInput:
    """An array among the call's arguments, at `path` (see arguments.ArgumentLayout)."""
    path: tuple

    def value(self, args, states):
        return arguments.get(args, self.path)


@dataclasses.dataclass(frozen=True)
class StateInput:
    """Array `index` of the attribute `path` of the block tree (`self.state = [h, c]`)."""
    path: str
    index: int

    def value(self, args, states):
        # Detached: its history (the previous call's graph) is usually freed by that
        # call's backward, and MXNet's cached graphs cannot take such an array as a
        # recorded input.
        return as_list(states[self.path][2])[self.index].detach()


@dataclasses.dataclass(frozen=True, eq=False)
class NumberInput:
    """A Python number kept on a block that the forward changes (number state), as a
    one-element float32 array."""
    owner: mx.gluon.Block
    attr: str

    def value(self, args, states):
        return mx.nd.array([getattr(self.owner, self.attr)], dtype="float32")


@dataclasses.dataclass(frozen=True, eq=False)
class ParameterInput:
    parameter: mx.gluon.Parameter

    def value(self, args, states):
        return self.parameter.data()


@dataclasses.dataclass(frozen=True, eq=False)
class CapturedInput:
    """An array made outside converted code that traced code read (a constant, a
    cell's begin_state): a function of what the graph is keyed on."""
    array: mx.nd.NDArray

    def value(self, args, states):
        return self.array


@dataclasses.dataclass(frozen=True)
class StateWrite:
    """After a run, the attribute `path` is set to `rebuild(outputs)`, from `count`
    graph outputs: an array, a list or tuple of them, a Python number (number
    state), or a constant (count 0)."""
    path: str
    count: int
    rebuild: typing.Callable


def _tensor_write(path, value):
    count = len(as_list(value))
    if isinstance(value, (list, tuple)):
        return StateWrite(path, count, type(value))
    return StateWrite(path, count, lambda outputs: outputs[0])


def _number_write(path, number_type):
    return StateWrite(path, 1, lambda outputs: python_number(outputs[0].asscalar(), number_type))


def python_number(value, number_type):
    """A number computed as float32 in a graph, as the Python type it was kept as."""
    return number_type(round(value)) if number_type in (bool, int) else number_type(value)


@dataclasses.dataclass
class Capture:
    symbol: mx.sym.Symbol   # outputs, then state outputs, then the guard vector if guarded
    inputs: list            # a *Input per symbol.list_inputs(), in that order
    num_outputs: int
    out_format: typing.Any  # None: the forward returned one array; n: a list of n
    state_writes: list      # StateWrite, in the order of the state outputs
    guards: list            # guards.Guard, in the guard vector's order
    shape_reads: dict       # argument array index -> dimensions the trace read
    exact: bool             # traced for exact input shapes (no open dims)
    blocks: list            # the block tree, kept alive: the cache key holds child ids

    @property
    def reads_state(self):
        return any(isinstance(source, StateInput) for source in self.inputs)


class Tracer:
    """Traces calls of one block's converted `forward` into Captures."""

    def __init__(self, block, forward, ndarray_code, profile):
        self.block, self.forward = block, forward
        self.ndarray_code = ndarray_code
        self.profile = profile      # speculation.Profile to speculate from, or None
        self.statements = {}        # "file:line" -> fates.Fate, over all traces
        self.traces = 0
        # Block attributes holding Python numbers the forward changes: graph inputs
        # and outputs (so not part of the cache key), learnt from traces.
        self.number_paths = set()

    def capture(self, args, layout, exact):
        """A Capture of the forward on `args`; traced a second time when the first
        trace finds numbers on blocks that it changes."""
        try:
            return self._capture(args, layout, exact)
        except NumbersChanged as change:
            self.number_paths |= change.paths
            return self._capture(args, layout, exact)

    def _capture(self, args, layout, exact):
        self.traces += 1
        prefix = self.block.prefix.rstrip("_") or "block"
        symbols, sources, shapes, replaced = list(args), {}, {}, []
        try:
            for i, path in enumerate(layout.leaves):
                name = "%s_data%d" % (prefix, i)
                array = arguments.put(symbols, path, mx.sym.var(name))
                replaced.append((path, array))
                sources[name], shapes[name] = ArgumentInput(path), array.shape
            with Rollback(self.block, frozenset(self.number_paths)) as rollback:
                substituted = self._state_as_variables(prefix, sources, shapes)
                numbers = self._numbers_as_variables(prefix, sources, shapes)
                params = {p.name: p for p in self.block.collect_params().values()}
                shapes.update({name: p.shape for name, p in params.items()
                               if p.shape and all(p.shape)})
                trace = tracing.Trace(prefix, shapes, ndarray_code=self.ndarray_code)
                trace.profile = self.profile
                try:
                    with tracing.tracing(trace):
                        out = self.forward(*symbols)
                finally:
                    self.statements.update(trace.statements)
                # State the forward assigned (an attribute it left as it was is not written back).
                writes = self._number_writes(numbers) + [
                    (_tensor_write(path, value), as_list(value))
                    for path, (_, _, value) in tensor_attributes(self.block).items()
                    if path not in numbers and value is not substituted.get(path)
                    and any(isinstance(v, mx.sym.Symbol) for v in as_list(value))]
                rollback.keep_graph_state()
        finally:
            for path, array in reversed(replaced):
                arguments.put(symbols, path, array)
        shape_reads = {i: trace.shape_reads.get("%s_data%d" % (prefix, i), set())
                       for i in range(len(layout.leaves))}
        return self._graph(out, writes, trace, sources, params, shape_reads, exact)

    def _state_as_variables(self, prefix, sources, shapes):
        """Replace each array kept on the block tree by a graph input variable."""
        substituted = {}
        for path, (owner, attr, value) in tensor_attributes(self.block).items():
            variables = []
            for j, array in enumerate(as_list(value)):
                name = "%s_state_%s_%d" % (prefix, path.replace(".", "_"), j)
                sources[name], shapes[name] = StateInput(path, j), array.shape
                variables.append(mx.sym.var(name))
            substituted[path] = like(value, variables)
            setattr(owner, attr, substituted[path])
        return substituted

    def _numbers_as_variables(self, prefix, sources, shapes):
        """Replace each number-state attribute by a graph input; {path: (owner, attr,
        variable, Python type)}."""
        numbers = {}
        for path in sorted(self.number_paths):
            owner, attr = owner_of(self.block, path)
            name = "%s_number_%s" % (prefix, path.replace(".", "_"))
            sources[name], shapes[name] = NumberInput(owner, attr), (1,)
            variable = mx.sym.var(name)
            numbers[path] = (owner, attr, variable, type(getattr(owner, attr)))
            setattr(owner, attr, variable)
        return numbers

    def _number_writes(self, numbers):
        """(StateWrite, graph outputs) for each number-state attribute the trace changed."""
        writes = []
        for path, (owner, attr, variable, number_type) in numbers.items():
            now = getattr(owner, attr)
            if isinstance(now, mx.sym.Symbol) and now is not variable:
                writes.append((_number_write(path, number_type), [now]))
            elif isinstance(now, NUMBER_TYPES):
                writes.append((StateWrite(path, 0, lambda outputs, now=now: now), []))
            elif now is not variable:
                raise tracing.FallbackRequired("the forward sets %s, a number it changes, to a %s"
                                               % (path, type(now).__name__),
                                               type(self.block).__name__)
        return writes

    def _graph(self, out, writes, trace, sources, params, shape_reads, exact):
        outputs, out_format = _flatten_outputs(out)
        state_writes = [write for write, _ in writes]
        state_outputs = [v for _, values in writes for v in values]
        # An output that is an input as it came (`return x`) must be a node of the
        # graph for MXNet's backward: pass it through identity.
        heads = [mx.sym.identity(o) if o.get_children() is None else o
                 for o in outputs + state_outputs]
        if trace.guards:
            heads.append(guards.guard_vector(trace.guards))
        graph = mx.sym.Group(heads)
        captured = {var.name: CapturedInput(array) for var, array in trace.captured.values()}
        inputs = []
        for name in graph.list_inputs():
            if name in sources:
                inputs.append(sources[name])
            elif name in params:
                inputs.append(ParameterInput(params[name]))
            elif name in captured:
                inputs.append(captured[name])
            else:
                # A placeholder of a loop or branch body read outside that body.
                raise tracing.FallbackRequired(
                    "a value computed inside a graph loop or branch is used outside it (for example "
                    "appended to a list inside a loop on a tensor); graph input %r" % name,
                    type(self.block).__name__)
        return Capture(graph, inputs, len(outputs), out_format, state_writes, list(trace.guards),
                       shape_reads, exact, block_tree(self.block))


def _flatten_outputs(out):
    if isinstance(out, mx.sym.Symbol):
        return [out], None
    if isinstance(out, (list, tuple)) and all(isinstance(o, mx.sym.Symbol) for o in out):
        return list(out), len(out)
    raise tracing.FallbackRequired("the forward returns %s, not arrays" % type(out).__name__,
                                   "return")
