"""A whole call as one graph: the batched graphs of a schedule's groups composed
in order, each group's arenas fed to the next, so that a call runs as one
CachedOp instead of one per group (the per-group cost, a CachedOp call and the
Python around it, is what small bodies such as a TreeRNN's spend their time in).

A program is built per schedule key (the graphs of the groups, in order: for a
binary tree, the tree's height), never per tree: the widths of the groups are
the shapes of the program's inputs (each group's slice of the call's row
indices, its own arrays stacked), so one program serves every tree of that
height.
"""
import dataclasses

import mxnet as mx

from ..capturing.capture import CapturedInput, ParameterInput
from .batched_graph import DOWN, ArenaInput, OwnInput, RowsInput, SharedInput


@dataclasses.dataclass(frozen=True)
class ArenaStart:
    """The first rows (zeros) of an arena, before any group appended to it."""
    arena: object
    index: int


@dataclasses.dataclass(frozen=True)
class GroupRows:
    group: int     # the (calls, nodes) row indices of the group's callees


@dataclasses.dataclass(frozen=True)
class GroupOwn:
    group: int
    index: int     # which of the body's own arrays, stacked over the group


class CallProgram:
    """The graph running the groups of every call whose schedule key is `key`
    ((graph, variant) per group, schedule.py): `symbol` (the entry's outputs) and
    `inputs` (an ArenaStart, GroupRows, GroupOwn, ParameterInput or
    CapturedInput per symbol.list_inputs())."""

    def __init__(self, key):
        self.key = key
        arenas, variables, sources = {}, {}, {}
        shared = None    # the outputs of the entry's down stage

        def variable(name, source):
            if name not in variables:
                variables[name] = mx.sym.var(name)
                sources[name] = source
            return variables[name]

        captured = {}
        for number, (graph, variant) in enumerate(key):
            whole = dict(zip(graph.whole, variant))
            substitutes = {}
            for name, source in zip(graph.symbol.list_inputs(), graph.inputs):
                if isinstance(source, ArenaInput):
                    rows = arenas.setdefault(source.arena, {})
                    if source.index not in rows:
                        rows[source.index] = variable(
                            "arena%d_%d" % (source.arena.number, source.index),
                            ArenaStart(source.arena, source.index))
                    substitutes[name] = rows[source.index]
                elif isinstance(source, RowsInput):
                    substitutes[name] = variable("group%d_rows" % number, GroupRows(number))
                elif isinstance(source, SharedInput):
                    substitutes[name] = shared[source.index]
                elif isinstance(source, OwnInput):
                    held = whole.get(source.index, ("stacked",))
                    if held[0] == "shared":   # the entry's shared arrays, one after the other
                        arrays = [shared[k] for k in held[1]]
                        substitutes[name] = arrays[0] if len(arrays) == 1 else mx.sym.concat(
                            *arrays, dim=0)
                    else:
                        substitutes[name] = variable("group%d_own%d" % (number, source.index),
                                                     GroupOwn(number, source.index))
                elif isinstance(source, ParameterInput):
                    substitutes[name] = variable(source.parameter.name, source)
                else:
                    # Captured arrays by identity: two bodies may name theirs alike.
                    key_of = id(source.array)
                    captured.setdefault(key_of, "captured%d" % len(captured))
                    substitutes[name] = variable(captured[key_of], CapturedInput(source.array))
            outputs = list(graph.symbol(**substitutes))
            if graph.writes is not None:
                for (arena, k), output in zip(graph.writes, outputs):
                    arenas.setdefault(arena, {})[k] = output
            elif graph.stage == DOWN:
                shared = outputs
        self.symbol = mx.sym.Group(outputs)
        self.inputs = [sources[name] for name in self.symbol.list_inputs()]
