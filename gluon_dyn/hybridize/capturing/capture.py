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
import numpy as np

from ... import graph_json, native
from ...host_arrays import host_array
from ...ops import gradient_flow
from . import arguments, deferred, deferred_init, guards, tracing
from .argument_writes import argument_writes
from .converted_reads import ModulesRead
from .hidden_parameters import hidden_parameters
from .host_values import is_host_value
from .numpy_interface import as_legacy, is_numpy_symbol
from .outputs import OutputTemplates, holds_alias as _holds_alias, rebuild_outputs
from .weak_binding import BlockReference
from .python_state import (NUMBER_TYPES, Rollback, StateChanged, as_list, block_tree, like,
                           is_tensor_value, owner_of, state_attributes, tensor_attributes)


@dataclasses.dataclass(frozen=True)
class ExportOptions:
    """How `export` traces the general graph: the bound of loops that keep per-step
    outputs (None: such a loop is an ExportError naming it)."""
    max_iterations: typing.Optional[int] = None


class ExportError(RuntimeError):
    """What a block's forward does that an exported graph cannot do, with file:line."""


@dataclasses.dataclass(frozen=True)
class ArgumentInput:
    """An array among the call's arguments, at `path` (see arguments.ArgumentLayout),
    the `index`-th in argument order."""
    path: tuple
    index: int

    def value(self, args, states):
        array = arguments.get(args, self.path)
        if isinstance(array, np.ndarray):    # numpy_arguments.py
            return host_array(array)
        # Operators take arrays in shared memory (a DataLoader's batch) beside arrays
        # on the CPU, and give results on the CPU; MXNet's CachedOp wants one context.
        if array.context.device_type == "cpu_shared":
            return array.as_in_context(mx.cpu(array.context.device_id))
        return array


@dataclasses.dataclass(frozen=True)
class StateInput:
    """Array `index` of the attribute `path` of the block tree (`self.state = [h, c]`)."""
    path: str
    index: int

    def value(self, args, states):
        # Detached: its history (the previous call's graph) is usually freed by that
        # call's backward, and MXNet's cached graphs cannot take such an array as a
        # recorded input. An array with a gradient attached (d2l's scratch weights)
        # is a leaf its gradient must reach, as it is.
        array = as_list(states[self.path][2])[self.index]
        return array if array.grad is not None else array.detach()


@dataclasses.dataclass(frozen=True, eq=False)
class NumberInput:
    """A Python number kept on a block that the forward changes (number state), as a
    one-element float32 array; `owner`: a weak_binding.BlockReference to its block."""
    owner: BlockReference
    attr: str

    def value(self, args, states):
        return host_array(np.array([getattr(self.owner(), self.attr)], np.float32))


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


def input_roles(sources):
    """CachedOp flags saying which of a graph's inputs (`sources`, in its order;
    None for an input a rewrite added) are MXNet parameters, the same arrays at
    every call (Parameters' and captured constants'), and which are data. MXNet
    binds parameters once (again where a call passes another array, reset_ctx) and
    runs the operators that read them in bulked segments, as Gluon's own CachedOps
    do: a MobileNet's inference call costs a fifth less. Only for inference with
    planned shapes: with parameters marked, MXNet 1.9.1's planned backward stops
    writing a parameter's gradient once a graph's calls per recording drop to one
    (docs/mxnet_behaviours.md), as a child graph's in a loop of its parent's Python."""
    bound = [isinstance(source, (ParameterInput, CapturedInput)) for source in sources]
    return [("data_indices", [i for i, once in enumerate(bound) if not once]),
            ("param_indices", [i for i, once in enumerate(bound) if once])]


@dataclasses.dataclass(frozen=True)
class StateWrite:
    """After a run, the attribute `path` is set to `rebuild(outputs)`, from `count`
    graph outputs: an array, a list or tuple of them, a Python number (number
    state), or a constant (count 0)."""
    path: str
    count: int
    rebuild: typing.Callable

    def apply(self, block, outputs):
        owner, attr = owner_of(block, self.path)
        setattr(owner, attr, self.rebuild(outputs))


def _tensor_write(path, value):
    count = len(as_list(value))
    if isinstance(value, (list, tuple)):
        return StateWrite(path, count, type(value))
    return StateWrite(path, count, lambda outputs: outputs[0])


def _rebound_write(path, value, where):
    """(StateWrite, graph outputs) for a list or dict attribute the forward set to
    `value`, a new one, which may hold graph values at any depth."""
    templates = OutputTemplates(where)
    template = templates.template(value)
    return StateWrite(path, len(templates.symbols),
                      lambda outputs: rebuild_outputs(template, outputs)), templates.symbols


def _number_write(path, number_type):
    # .item(): the number may come from np code, as an np array (shape ()).
    return StateWrite(path, 1, lambda outputs: python_number(outputs[0].asnumpy().item(),
                                                             number_type))


def python_number(value, number_type):
    """A number computed as float32 in a graph, as the Python type it was kept as."""
    return number_type(round(value)) if number_type in (bool, int) else number_type(value)


@dataclasses.dataclass
class Capture:
    symbol: mx.sym.Symbol   # outputs, then state outputs, then the guard vector if guarded
    inputs: list            # a *Input per symbol.list_inputs(), in that order
    num_outputs: int
    out_format: typing.Any  # the forward's return value, graph outputs as their positions
    writes: list            # StateWrite / deferred.ContainerWrite, in the order of the outputs
                            # after the forward's: applied after a run whose guards held
    guards: list            # guards.Guard, in the guard vector's order
    shape_reads: dict       # argument array index -> dimensions the trace read
    exact: bool             # traced for exact input shapes (no open dims)
    blocks: list            # the block's descendants, kept alive: the cache key holds their ids
    # Parameters read only under conditions that may not hold (stale_gradients.py);
    # the output before the guard vector says, per parameter, whether its path ran.
    conditional_parameters: list = dataclasses.field(default_factory=list)
    # argument_writes.ArgumentWrite: the forward's changes to the lists, dicts and
    # objects it was given, applied (before out_format is rebuilt) from the outputs;
    # the paths of those mutable arguments, if the writes or out_format refer to them.
    argument_writes: list = dataclasses.field(default_factory=list)
    mutable_paths: list = dataclasses.field(default_factory=list)
    # Positions among the outputs and state outputs of the arrays the code made as
    # np arrays (numpy_interface.py): the graph gives legacy ones.
    numpy_outputs: frozenset = frozenset()
    # {position among the outputs and state outputs: names of the captured inputs it
    # reads} of the outputs computed from constants and arrays captured from outside
    # only. Imperatively such an array has autograd history only if one of those
    # arrays has: a recorded run gives it without otherwise (in-place writes into
    # arrays made from it then work, as imperatively).
    untracked_outputs: dict = dataclasses.field(default_factory=dict)

    @property
    def reads_state(self):
        return any(isinstance(source, StateInput) for source in self.inputs)


class InputNames:
    """Names of a graph's input variables. Under a block's `prefix` for the graphs
    it caches; without one (export), MXNet's: `data` for a single argument array,
    else `data0`, `data1`, ... in argument order, and for arrays and numbers kept on
    blocks the attribute's path ("state" or "state0", "state1" for a list;
    "encoder_count" for encoder.count)."""

    def __init__(self, prefix, num_arguments):
        self.prefix, self.num_arguments = prefix, num_arguments

    def argument(self, index):
        if self.prefix is not None:
            return "%s_data%d" % (self.prefix, index)
        return "data" if self.num_arguments == 1 else "data%d" % index

    def state(self, path, index, in_list):
        attribute = path.replace(".", "_")
        if self.prefix is not None:
            return "%s_state_%s_%d" % (self.prefix, attribute, index)
        return "%s%d" % (attribute, index) if in_list else attribute

    def number(self, path):
        attribute = path.replace(".", "_")
        return attribute if self.prefix is None else "%s_number_%s" % (self.prefix, attribute)


class Tracer:
    """Traces calls of one block's converted `forward` into Captures."""

    def __init__(self, block_reference, forward, ndarray_code, profile, where,
                 converted_functions=()):
        """`block_reference`: a weak_binding.BlockReference to the block; `forward`:
        the converted forward, unbound; `converted_functions`: the functions converted
        for the block, as written (transpiler.convert_block)."""
        self._block, self._forward = block_reference, forward
        # The modules of the code its traces ran, whose values its key holds.
        self.modules_read = ModulesRead(converted_functions)
        self.where = where          # "file:line" of the forward (or part) traced
        self.ndarray_code = ndarray_code
        self.profile = profile      # speculation.Profile to speculate from, or None
        self.statements = {}        # "file:line" -> fates.Fate, over all traces
        self.traces = 0
        # Block attributes holding Python numbers the forward changes: graph inputs
        # and outputs (so not part of the cache key), learnt from traces.
        self.number_paths = set()
        # Lists and dicts on blocks that traces wrote and did not read (deferred.py).
        self.containers_written, self.containers_read = set(), set()
        # Lists and dicts on blocks that traces replaced by new ones (d2l's
        # `self._attention_weights = [[None] * n, ...]`), written back after each run.
        self.containers_rebound = set()

    @property
    def block(self):
        return self._block()

    @property
    def unkeyed_paths(self):
        """Attributes of the block tree the cache key leaves out: graph inputs, or
        containers graphs only write to."""
        return self.number_paths | ((self.containers_written | self.containers_rebound) -
                                    self.containers_read)

    def capture(self, args, layout, open_dims=None, export=None):
        """A Capture of the forward on `args`, for every size of the argument dims in
        `open_dims` ({argument array index: dims}; none: exact shapes); traced again
        while a trace finds numbers on blocks that it changes, or lists of arrays it
        appends to (each found once). With `export` (export.ExportOptions), the
        general graph: nothing speculated, every size read as a graph value, inputs
        named as MXNet's export names them."""
        exact = export is None and not open_dims
        while True:
            try:
                return self._capture(args, layout, exact, export, open_dims)
            except StateChanged as change:
                if change.numbers <= self.number_paths and \
                        change.containers <= self.containers_written:
                    raise   # found already: tracing again would find it again
                self.number_paths |= change.numbers
                self.containers_written |= change.containers

    def _capture(self, args, layout, exact, export, open_dims):
        self.traces += 1
        prefix = self.block.prefix.rstrip("_") or "block"
        names = InputNames(prefix if export is None else None, len(layout.leaves))
        sources, shapes, variables = {}, {}, []
        dtypes = {}
        for i, path in enumerate(layout.leaves):
            name, array = names.argument(i), arguments.get(args, path)
            variables.append(tracing.variable(name, array))
            sources[name], shapes[name] = ArgumentInput(path, i), array.shape
            dtypes[name] = array.dtype
        with arguments.Substituted(args, layout, variables) as substituted_args, \
                Rollback(self.block, self.where, frozenset(self.number_paths)) as rollback:
            substituted = self._state_as_variables(names, sources, shapes)
            state_sizes = {path: len(value) for path, value in substituted.items()
                           if isinstance(value, list)}
            numbers = self._numbers_as_variables(names, sources, shapes)
            watched = self._containers_as_watched()
            params = {p.name: p for p in self.block.collect_params().values()}
            shapes.update({name: p.shape for name, p in params.items()
                           if p.shape and all(p.shape)})
            trace = tracing.Trace(prefix, shapes, ndarray_code=self.ndarray_code)
            trace.dtypes = dict(dtypes, **_kept_dtypes(sources, rollback.saved))
            trace.kept_containers = {id(container) for container, _ in rollback.containers} | \
                {id(copy) for _, _, _, copy in watched.values()}
            trace.context = layout.context
            trace.open_dims = {names.argument(i): set((open_dims or {}).get(i, ()))
                               for i in range(len(layout.leaves))}
            trace.numpy = mx.util.is_np_array()
            trace.profile = self.profile if export is None else None
            trace.export = export
            trace.modules_read = self.modules_read
            for _, _, _, copy in watched.values():
                copy.read = False    # from here on, reads are the forward's
            try:
                with tracing.tracing(trace):
                    for _, _, variable, number_type in numbers.values():
                        if number_type is int:   # indexes as an int (operators/subscripts.py)
                            tracing.scalar_index(variable)
                    out = self._forward(self.block, *substituted_args.args)
            finally:
                self.statements.update(trace.statements)
            read = {path for path, (_, _, _, copy) in watched.items() if copy.read}
            grown = [path for path, value in substituted.items() if isinstance(value, list)
                     and list.__len__(value) != state_sizes[path]]
            if grown:   # appended to in place: a log of arrays, not state it replaces
                raise StateChanged(containers=grown)
            # What the forward returns and what it did to the containers it was
            # given, templated before they hold the caller's arrays again.
            templates = OutputTemplates(self.where, {id(mutable): index for index, (_, mutable)
                                                     in enumerate(layout.mutables)})
            out_format = templates.template(out)
            changed_arguments = argument_writes(layout, substituted_args.traced, templates)
            # State the forward assigned (an attribute it left as it was is not written back).
            writes = self._number_writes(numbers) + [
                (_tensor_write(path, value), as_list(value))
                for path, (_, _, value) in tensor_attributes(self.block).items()
                if path not in numbers and path not in watched and
                value is not substituted.get(path) and
                any(isinstance(v, mx.sym.Symbol) for v in as_list(value))]
            writes += self._container_writes(watched, read)
            rollback.keep_graph_state()
        shape_reads = {i: trace.shape_reads.get(names.argument(i), set())
                       for i in range(len(layout.leaves))}
        return self._graph(templates.symbols, out_format, changed_arguments, layout, writes,
                           trace, sources, params, shape_reads, exact)

    def _state_as_variables(self, names, sources, shapes):
        """Replace each array kept on the block tree by a graph input variable."""
        substituted = {}
        for path, (owner, attr, value) in tensor_attributes(self.block).items():
            if path in self.containers_written:
                continue    # a list the forward appends to: watched (deferred.py)
            variables = []
            for j, array in enumerate(as_list(value)):
                name = names.state(path, j, isinstance(value, (list, tuple)))
                sources[name], shapes[name] = StateInput(path, j), array.shape
                variables.append(tracing.variable(name, array))
            substituted[path] = like(value, variables)
            setattr(owner, attr, substituted[path])
        return substituted

    def _numbers_as_variables(self, names, sources, shapes):
        """Replace each number-state attribute by a graph input; {path: (owner, attr,
        variable, Python type)}."""
        numbers = {}
        for path in sorted(self.number_paths):
            owner, attr = owner_of(self.block, path)
            name = names.number(path)
            sources[name], shapes[name] = NumberInput(BlockReference(owner), attr), (1,)
            variable = mx.sym.var(name)
            numbers[path] = (owner, attr, variable, type(getattr(owner, attr)))
            setattr(owner, attr, variable)
        return numbers

    def _containers_as_watched(self):
        """Replace each list and dict kept on the block tree (not arrays) by a watched
        copy; {path: (owner, attr, original, copy)}."""
        watched = {}
        for path, (owner, attr, value) in state_attributes(self.block).items():
            if type(value) in (list, dict) and (not is_tensor_value(value) or
                                                path in self.containers_written):
                watched[path] = (owner, attr, value, deferred.watch(value))
                setattr(owner, attr, watched[path][3])
        return watched

    def _container_writes(self, watched, read):
        """(ContainerWrite, graph outputs) for what the trace did to the watched
        copies, which are then put back as they were; `read`: those it read."""
        writes = []
        self.containers_read |= read
        rebound = []
        for path, (owner, attr, original, copy) in watched.items():
            now = getattr(owner, attr)
            setattr(owner, attr, original)
            found = deferred.container_writes(path, original, copy, self.where)
            if found:
                self.containers_written.add(path)
            writes += found
            if now is not copy:
                self.containers_rebound.add(path)
                rebound.append(_rebound_write(path, now, self.where))
        # After the writes to the containers they replace (found by their paths).
        return writes + rebound

    def _number_writes(self, numbers):
        """(StateWrite, graph outputs) for each number-state attribute the trace changed."""
        writes = []
        for path, (owner, attr, variable, number_type) in numbers.items():
            now = getattr(owner, attr)
            if is_host_value(now):   # a number read from a tensor, kept in the graph
                now = now.symbol
            if isinstance(now, mx.sym.Symbol) and now is not variable:
                writes.append((_number_write(path, number_type), [now]))
            elif isinstance(now, NUMBER_TYPES):
                writes.append((StateWrite(path, 0, lambda outputs, now=now: now), []))
            elif now is not variable:
                raise tracing.FallbackRequired("the forward sets %s, a number it changes, to a %s"
                                               % (path, type(now).__name__),
                                               self.where)
        return writes

    def _graph(self, outputs, out_format, changed_arguments, layout, writes, trace, sources,
               params, shape_reads, exact):
        all_writes = [write for write, _ in writes]
        produced = outputs + [v for _, values in writes for v in values]
        # np symbols leave the graph as legacy ones, their arrays made np ones again
        # after each run (numpy_interface.py).
        numpy_outputs = frozenset(i for i, o in enumerate(produced) if is_numpy_symbol(o))
        # An output that is an input as it came (`return x`) must be a node of the
        # graph for MXNet's backward: pass it through identity.
        heads = [mx.sym.identity(o) if o.get_children() is None else o
                 for o in as_legacy(produced)]
        captured_names = {variable.name for variable, _ in trace.captured.values()}
        untracked_outputs = gradient_flow.outputs_reading_only(
            mx.sym.Group(heads), captured_names) if heads else {}
        # An exported graph leaves stale-gradient bookkeeping to its new owner.
        conditional = [] if trace.export else self._conditionally_read(heads, trace, params)
        if conditional:
            heads.append(mx.sym.concat(*[_any(trace.conditional_reads[name])
                                         for name in conditional], dim=0))
        if trace.guards:
            heads.append(guards.guard_vector(trace.guards, trace.dtypes))
        if not heads:
            raise tracing.FallbackRequired("it computes no array (only Python values)",
                                           self.where)
        graph = graph_json.with_unique_names(mx.sym.Group(heads))
        _finish_deferred_initialization(graph, trace.shapes, params)
        captured = {var.name: CapturedInput(array) for var, array in trace.captured.values()}
        inputs, hidden = [], None
        for name in graph.list_inputs():
            if name in sources:
                inputs.append(sources[name])
            elif name in params:
                inputs.append(ParameterInput(params[name]))
            elif name in captured:
                inputs.append(captured[name])
            else:
                # A child made by the trace, or kept out of Gluon's tree (hidden_parameters.py).
                hidden = hidden_parameters(self.block) if hidden is None else hidden
                if name not in hidden:
                    # A placeholder of a loop or branch body read outside that body.
                    raise tracing.FallbackRequired(
                        "a value computed inside a graph loop or branch is used outside it (for "
                        "example appended to a list inside a loop on a tensor); graph input %r"
                        % name, self.where)
                inputs.append(ParameterInput(hidden[name]))
        return Capture(graph, inputs, len(outputs), out_format, all_writes, list(trace.guards),
                       shape_reads, exact, block_tree(self.block)[1:],
                       [params[name] for name in conditional], changed_arguments,
                       [path for path, _ in layout.mutables] if changed_arguments or
                       _holds_alias(out_format) else [], numpy_outputs, untracked_outputs)

    @staticmethod
    def _conditionally_read(heads, trace, params):
        """Names of the parameters the graph reads only in branches or loop bodies
        that may not run (stale_gradients.py), in a fixed order."""
        candidates = {name for name in trace.conditional_reads if name in params}
        if not candidates or not heads:
            return []
        always = graph_json.read_outside_control_flow(mx.sym.Group(heads), candidates,
                                                      ignored_ops=native.TRAINING_ONLY_OPS)
        return sorted(candidates - always)


def _kept_dtypes(sources, saved):
    """{input name: dtype} of the arrays and numbers kept on blocks (`saved`: the
    Rollback's state attributes, before the trace replaced them)."""
    dtypes = {}
    for name, source in sources.items():
        if isinstance(source, StateInput):
            dtypes[name] = as_list(saved[source.path][2])[source.index].dtype
        elif isinstance(source, NumberInput):
            dtypes[name] = np.float32     # given as a float32 array
    return dtypes


def _finish_deferred_initialization(graph, shapes, params):
    """Initialize the parameters of `graph` whose initialization Gluon deferred until
    their shapes are known (a root block's own `nn.Dense(4)`), their shapes inferred
    from the graph's input shapes as Gluon does on a block's first call
    (deferred_init.py initializes the layers traced code calls)."""
    inputs = set(graph.list_inputs())
    waiting = [params[name] for name in inputs if name in params and params[name]._deferred_init]
    if not waiting:
        return
    arg_shapes, _, aux_shapes = graph.infer_shape_partial(
        **{name: shape for name, shape in shapes.items() if name in inputs})
    inferred = dict(zip(graph.list_arguments(), arg_shapes))
    inferred.update(zip(graph.list_auxiliary_states(), aux_shapes))
    for param in waiting:
        shape = inferred.get(param.name)
        if shape and all(shape):
            param.shape = shape
            param._finish_deferred_init()
    deferred_init.check_initialized(waiting)


def _any(conditions):
    """1 where any of the one-element 0/1 `conditions` is 1."""
    result = conditions[0]
    for condition in conditions[1:]:
        result = mx.sym.broadcast_maximum(result, condition)
    return mx.sym.reshape(result, shape=(1,))
