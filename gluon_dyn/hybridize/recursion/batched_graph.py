"""The graphs that run a body's stage for a group of nodes in one call.

Results of a function's nodes are kept as rows of arrays ("arenas", one per
result of the function, per result type), starting with one row of zeros: a
node's results are the rows at its row index. The arrays a recursive
function's down stage computes (passes.py) are kept the same way, in arenas of
their own per shape and dtype. A stage's graph takes the arenas it reads and a
(blocks, nodes) matrix of row indices (a block per callee, per array received
from a caller's down stage, per value handed on by the node's own down stage),
gathers each with `take`, stacks the group's own arrays along axis 0, and
returns the arenas it writes with the group's rows appended. The entry's (run
once per call) returns its values instead: its outputs, or the arrays its down
stage shares with every node. Gathering and appending inside the graph make one
call per group, whatever the tree.
"""
import dataclasses
import json

import mxnet as mx

from .batch_axes import NotBatchable, batch_axes
from .body import RECEIVED, STACKED, WHOLE
from .output_type import output_type

UP, DOWN = "up", "down"


@dataclasses.dataclass(eq=False)
class Arena:
    """The rows holding one function's results of one type, or (`passes`) the
    arrays of one shape and dtype its down stage computes."""
    number: int
    function: object
    output_type: object    # output_type.OutputType
    passes: bool

    def row_shapes(self):
        return [(shape[1:], dtype) for shape, dtype in self.output_type.arrays]


@dataclasses.dataclass(frozen=True)
class ArenaInput:
    arena: Arena
    index: int


@dataclasses.dataclass(frozen=True)
class RowsInput:
    """The (blocks, nodes) matrix of row indices (BatchedGraph.blocks)."""


@dataclasses.dataclass(frozen=True)
class OwnInput:
    index: int   # which of the body's own arrays: stacked over the group, or whole


@dataclasses.dataclass(frozen=True)
class WrittenRowsInput:
    """The rows of its arena that write `write` fills (BatchedGraph.scattered)."""
    write: int


@dataclasses.dataclass(frozen=True)
class SharedInput:
    """Output `index` of the entry's down stage, in the entry's own up stage."""
    index: int


def pass_arena(arena_for, function, shape, dtype):
    """The arena of the arrays of `shape` and `dtype` that `function`'s down stage computes."""
    return arena_for(function, output_type(None, ((shape, dtype),)), passes=True)


class BatchedGraph:
    """One stage (UP or DOWN) of a body: `symbol`, its `inputs` (an ArenaInput,
    RowsInput, OwnInput, SharedInput or the body's ParameterInput/CapturedInput
    per symbol.list_inputs()), `blocks` (what each row of the RowsInput matrix
    indexes: ("slot", call), ("received", own input), ("handoff", down output) or
    ("node", 0), the nodes' own rows, for a stage reading nothing else per node),
    `writes` ((arena, index) per output; None for the entry, whose outputs are
    returned), for a down stage `pass_rows` ((arena, [down output, ...]) in the
    order the outputs are appended) and `batched` (False with `not_batched`
    saying why: the stage then runs one node per call)."""

    def __init__(self, body, stage, arena_for):
        self.stage = stage
        self.open_dims = body.open_dims
        self.shared_shapes = [shape for shape, _ in body.down.outputs] if body.down else []
        prefix = "%s_%s%d%s" % (body.function.owner.prefix.rstrip("_") or "block",
                                body.function.name, body.number, "_down" if stage == DOWN else "")
        symbol = body.symbol if stage == UP else body.down.symbol
        handoffs = body.down.handoffs if stage == UP and body.down else {}
        used = set(symbol.list_inputs())
        # The arrays the stage reads whole (the sentence).
        self.whole = [index for index, kind in enumerate(body.kinds)
                      if kind == WHOLE and body.own_inputs[index] in used]
        self.gathered = {} if body.entry else _gathered(body, symbol, self.whole)
        stacked = next((name for index, name in enumerate(body.own_inputs)
                        if body.kinds[index] == STACKED and name in used), None)
        self.blocks = self._blocks(body, stage, handoffs, stacked)
        self.batched, self.not_batched, self.axes = False, "the entry runs once per call", None
        if not body.entry:
            symbol = self._check_batching(body, symbol, self._batched_inputs(body, stage))
        rows = mx.sym.var(prefix + "_rows")
        variables, inputs = {}, {rows.name: RowsInput()}

        def arena_variable(arena, index):
            name = "%s_arena%d_%d" % (prefix, arena.number, index)
            if name not in variables:
                variables[name] = mx.sym.var(name)
                inputs[name] = ArenaInput(arena, index)
            return variables[name]

        count = len(self.blocks)
        vectors = ([mx.sym.reshape(rows, shape=(-1,))] if count == 1 else
                   list(mx.sym.split(rows, num_outputs=count, axis=0, squeeze_axis=True))
                   if count else [])
        gathered = {}   # graph input name -> (arena, its block)
        if stage == UP:
            gathered.update((name, (arena_for(body.slots[slot].callee,
                                              body.slots[slot].output_type), index,
                                    ("slot", slot)))
                            for name, (slot, index) in body.placeholders.items())
        gathered.update((body.own_inputs[index], (pass_arena(arena_for, *received), 0,
                                                  ("received", index)))
                        for index, received in body.received.items())
        for name, k in handoffs.items():
            if body.entry:
                inputs[name] = SharedInput(k)
            else:
                gathered[name] = (pass_arena(arena_for, body.function, *body.down.outputs[k]), 0,
                                  ("handoff", k))
        vector = dict(zip(self.blocks, vectors))
        substitutes = {name: mx.sym.take(arena_variable(arena, index), vector[block], axis=0)
                       for name, (arena, index, block) in gathered.items() if name in used}
        outputs = list(symbol(**substitutes)) if substitutes else list(symbol)
        inputs.update((name, OwnInput(i)) for i, name in enumerate(body.own_inputs)
                      if name not in substitutes)
        self.writes, self.pass_rows, self._appends = None, [], []
        if not body.entry:
            # Without blocks (no substitutes) `symbol` is the graph of `outputs`.
            reference = vectors[0] if vectors else symbol.get_internals()[stacked]
            outputs = [_rows_of(output, axis, reference) for output, axis in zip(
                outputs, self.axes or [0] * len(outputs))]
            outputs = self._appended(body, stage, outputs, arena_for, arena_variable)
        self.symbol = mx.sym.Group(outputs)
        inputs.update(body.sources)
        self.inputs = [inputs[name] for name in self.symbol.list_inputs()]
        self._prefix, self._scattered = prefix, None

    def scattered(self):
        """(symbol, inputs): the graph writing its rows into the arenas it
        writes, at the rows a WrittenRowsInput gives each write, instead of
        appending them (schedule.py, placed bucketed)."""
        if self._scattered is None:
            if self.writes is None:
                self._scattered = self.symbol, self.inputs
            else:
                sources = dict(zip(self.symbol.list_inputs(), self.inputs))
                outputs = []
                for write, (arena, rows) in enumerate(self._appends):
                    name = "%s_written%d" % (self._prefix, write)
                    sources[name] = WrittenRowsInput(write)
                    outputs.append(mx.sym.contrib.index_copy(
                        arena, mx.sym.var(name),
                        rows[0] if len(rows) == 1 else mx.sym.concat(*rows, dim=0)))
                symbol = mx.sym.Group(outputs)
                self._scattered = symbol, [sources[name] for name in symbol.list_inputs()]
        return self._scattered

    @staticmethod
    def _blocks(body, stage, handoffs, stacked):
        blocks = [("slot", slot) for slot in range(len(body.slots))] if stage == UP else []
        blocks += [("received", index) for index in sorted(body.received)]
        if not body.entry:
            blocks += [("handoff", k) for k in sorted(set(handoffs.values()))]
            if not blocks and stacked is None:
                # Nothing a row per node: the nodes' own rows give results that are
                # the same for every node one row each.
                blocks = [("node", 0)]
        return blocks

    @staticmethod
    def _batched_inputs(body, stage):
        """The stage's inputs with a row per node."""
        batched = {name for index, name in enumerate(body.own_inputs)
                   if body.kinds[index] in (STACKED, RECEIVED)}
        if stage == UP:
            batched |= set(body.placeholders)
            if body.down is not None:
                batched |= set(body.down.handoffs)
        return batched

    def symbolic_dims(self):
        """The input dims that differ between calls: numbers of rows (and of
        nodes), the sizes of arrays read whole that the signature does not hold
        (the sentence's length), the shapes of what the entry's down stage hands on."""
        dims = {}
        for name, source in zip(self.symbol.list_inputs(), self.inputs):
            kind = type(source)
            if kind is ArenaInput:
                dims[name] = {0: "arena%d_rows" % source.arena.number}
            elif kind is RowsInput and self.batched:
                dims[name] = {1: "nodes"}
            elif kind is OwnInput and (source.index in self.open_dims or
                                       source.index in self.gathered):
                # A gathered array's rows are those of the group's arrays together.
                varying = set(self.open_dims.get(source.index, ()))
                varying |= {0} if source.index in self.gathered else set()
                dims[name] = {dim: "%s_dim%d" % (name, dim) for dim in varying}
            elif kind is OwnInput and self.batched:
                dims[name] = {0: "nodes"}
            elif kind is SharedInput and self.open_dims:
                dims[name] = {dim: "%s_dim%d" % (name, dim) for dim in range(len(
                    self.shared_shapes[source.index]))}
        return dims

    def _appended(self, body, stage, outputs, arena_for, arena_variable):
        """The arenas the stage writes, with the group's rows of `outputs` appended;
        sets `writes` and `_appends` (per write, its arena's variable and the
        rows appended)."""
        if stage == UP:
            arena = arena_for(body.function, body.output_type)
            self.writes = [(arena, k) for k in range(len(outputs))]
            self._appends = [(arena_variable(arena, k), [output])
                             for k, output in enumerate(outputs)]
        else:
            rows = {}   # arena -> the down outputs it receives, in order
            for k, (shape, dtype) in enumerate(body.down.outputs):
                rows.setdefault(pass_arena(arena_for, body.function, shape, dtype), []).append(k)
            self.writes = [(arena, 0) for arena in rows]
            self.pass_rows = list(rows.items())
            self._appends = [(arena_variable(arena, 0), [outputs[k] for k in ks])
                             for arena, ks in rows.items()]
        return [mx.sym.concat(arena, *rows, dim=0) for arena, rows in self._appends]

    def _check_batching(self, body, symbol, batched):
        """Sets `batched`, `axes` (the batch axis of each output) or `not_batched`;
        returns the symbol to run (rewritten to run batched: batch_axes)."""
        shapes = {**body.shapes, **{name: source.value(None, None).shape
                                    for name, source in body.sources.items()}}
        try:
            rewritten, axes = batch_axes(symbol, batched, shapes)
        except NotBatchable as reason:
            self.not_batched = str(reason)
            return symbol
        if any(axis not in (0, None) for axis in axes):
            self.not_batched = "a result's rows are not along its first axis"
            return symbol
        self.axes, self.batched, self.not_batched = axes, True, None
        return rewritten


def _gathered(body, symbol, whole):
    """{whole input: [its index inputs]} for the whole inputs (own input indices)
    `symbol` reads only by the rows its index inputs pick (`x[tree.idx]`): a
    group may then hold nodes reading different such arrays (the sentences of a
    minibatch), given one after the other, each node's index moved to its own
    array's rows (execution.own_value)."""
    graph = json.loads(symbol.tojson())
    nodes = graph["nodes"]
    names = {body.own_inputs[index]: index for index in whole}
    indexing = {body.own_inputs[index]: target for index, target in body.index_inputs.items()}
    found = {index: [i for i, target in body.index_inputs.items() if target == index]
             for index in whole}
    for entry in graph["heads"]:
        found.pop(names.get(nodes[entry[0]]["name"]) if nodes[entry[0]]["op"] == "null"
                  else None, None)
    for node in nodes:
        for position, entry in enumerate(node["inputs"]):
            source = nodes[entry[0]]
            target = names.get(source["name"]) if source["op"] == "null" else None
            if target is None:
                continue
            index = nodes[node["inputs"][1][0]] if len(node["inputs"]) > 1 else None
            if not (node["op"] == "take" and position == 0 and
                    int(node.get("attrs", {}).get("axis", 0)) == 0 and index["op"] == "null" and
                    indexing.get(index["name"]) == target):
                found.pop(target, None)
    return {index: inputs for index, inputs in found.items() if inputs}


def _rows_of(output, axis, reference):
    """A result that is the same for every node of a group, one row per node."""
    if axis is not None or reference is None:
        return output
    return mx.sym.broadcast_like(output, reference, lhs_axes=(0,), rhs_axes=(0,))
