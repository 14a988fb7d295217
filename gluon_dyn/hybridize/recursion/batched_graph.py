"""The graph that runs a body for a group of nodes in one call.

Results of a function's nodes are kept as rows of arrays ("arenas", one per
result of the function, per result type), starting with one row of zeros: a
node's results are the rows at its row index. A body's graph takes the arenas
its callees' results are in and a (calls, nodes) matrix of row indices, gathers
each call's results with `take`, stacks the group's own arrays along axis 0, and
returns its function's arenas with the group's results appended. The entry's
body (forward) returns its outputs instead. Gathering and appending inside the
graph make one call per group, whatever the tree.
"""
import dataclasses

import mxnet as mx

from .batch_axes import NotBatchable, batch_axes


@dataclasses.dataclass(eq=False)
class Arena:
    """The rows holding one function's results of one type."""
    number: int
    function: object
    output_type: object    # body.OutputType

    def row_shapes(self):
        return [(shape[1:], dtype) for shape, dtype in self.output_type.arrays]


@dataclasses.dataclass(frozen=True)
class ArenaInput:
    arena: Arena
    index: int


@dataclasses.dataclass(frozen=True)
class RowsInput:
    """The (calls, nodes) matrix of the callees' row indices."""


@dataclasses.dataclass(frozen=True)
class OwnInput:
    index: int   # which of the body's own arrays, stacked over the group


class BatchedGraph:
    """`symbol`, its `inputs` (an ArenaInput, RowsInput, OwnInput or the body's
    ParameterInput/CapturedInput per symbol.list_inputs()), `appends_to` (the
    Arena it returns, extended; None for the entry) and `batched` (False with
    `not_batched` saying why: the body then runs one node per call)."""

    def __init__(self, body, arena_for, entry):
        prefix = "%s_%s%d" % (body.function.owner.prefix.rstrip("_") or "block",
                              body.function.name, body.number)
        self.appends_to = None if entry else arena_for(body.function, body.output_type)
        self.batched, self.not_batched = False, "the entry runs once per call"
        if not entry:
            self._check_batching(body)
        rows = mx.sym.var(prefix + "_rows")
        variables, inputs = {}, {rows.name: RowsInput()}

        def arena_variable(arena, index):
            name = "%s_arena%d_%d" % (prefix, arena.number, index)
            if name not in variables:
                variables[name] = mx.sym.var(name)
                inputs[name] = ArenaInput(arena, index)
            return variables[name]

        calls = len(body.slots)
        indices = ([mx.sym.reshape(rows, shape=(-1,))] if calls == 1 else
                   list(mx.sym.split(rows, num_outputs=calls, axis=0, squeeze_axis=True))
                   if calls else [])
        substitutes, used = {}, set(body.symbol.list_inputs())
        for name, (slot, index) in body.placeholders.items():
            if name not in used:
                continue
            arena = arena_for(body.slots[slot].callee, body.slots[slot].output_type)
            substitutes[name] = mx.sym.take(arena_variable(arena, index), indices[slot], axis=0)
        outputs = list(body.symbol(**substitutes)) if substitutes else list(body.symbol)
        inputs.update((name, OwnInput(i)) for i, name in enumerate(body.own_inputs))
        if self.appends_to is not None:
            reference = indices[0] if indices else (
                body.symbol.get_internals()[body.own_inputs[0]] if body.own_inputs else None)
            outputs = [mx.sym.concat(arena_variable(self.appends_to, k),
                                     self._rows_of(output, axis, reference), dim=0)
                       for k, (output, axis) in enumerate(zip(outputs, self.axes))]
        self.symbol = mx.sym.Group(outputs)
        inputs.update(body.sources)
        self.inputs = [inputs[name] for name in self.symbol.list_inputs()]

    def _check_batching(self, body):
        self.axes = [0] * len(body.output_type.arrays)
        try:
            axes = batch_axes(body.symbol, set(body.own_inputs) | set(body.placeholders),
                              {**body.shapes, **{name: source.value(None, None).shape
                                                 for name, source in body.sources.items()}})
        except NotBatchable as reason:
            self.not_batched = str(reason)
            return
        if any(axis not in (0, None) for axis in axes):
            self.not_batched = "a result's rows are not along its first axis"
        elif None in axes and not (body.slots or body.own_inputs):
            self.not_batched = "its results do not depend on the node"
        else:
            self.axes, self.batched, self.not_batched = axes, True, None

    @staticmethod
    def _rows_of(output, axis, reference):
        """A result that is the same for every node of a group, one row per node."""
        if axis is not None or reference is None:
            return output
        return mx.sym.broadcast_like(output, reference, lhs_axes=(0,), rhs_axes=(0,))
