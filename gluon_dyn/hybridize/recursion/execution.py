"""Running the groups of a call: each group's graph called once, arenas passed on.

A graph runs as an MXNet CachedOp (recorded under autograd.record(), whose
backward then flows through every group's gather and append), or for inference
under backend="tvm" as a tvm_bridge plan compiled with the number of nodes and
of arena rows left symbolic, so one plan serves every group and tree.
"""
import mxnet as mx
import numpy as np
from mxnet import autograd

from .batched_graph import ArenaInput, OwnInput, RowsInput


class GraphRunner:
    """Calls one body's BatchedGraph; counts its calls and where they ran."""

    def __init__(self, graph, tvm):
        self.graph, self.tvm = graph, tvm
        self._inference = mx.nd.CachedOp(graph.symbol, flags=[("static_alloc", True)])
        self._recording = None
        self.plan = None             # tvm_bridge.SegmentedGraph, once built
        self.plan_failed = False
        self.on_tvm = False          # the plan runs segments on TVM
        self.calls = {"mxnet": 0, "tvm": 0}

    def __call__(self, values):
        if autograd.is_recording():
            if self._recording is None:
                self._recording = mx.nd.CachedOp(self.graph.symbol)
            return self._mxnet(self._recording, values)
        if self.tvm is not None and self.plan is None and not self.plan_failed:
            self.plan = self.tvm.symbolic_plan(self.graph.symbol, values, self._symbolic_dims())
            self.plan_failed = self.plan is None
            self.on_tvm = self.plan is not None and not self.plan.uses_whole_graph and any(
                step.backend == "tvm" for step in self.plan.steps)
        if self.plan is not None:
            self.calls["tvm" if self.on_tvm else "mxnet"] += 1
            return self.plan(*values)
        return self._mxnet(self._inference, values)

    def _mxnet(self, op, values):
        self.calls["mxnet"] += 1
        results = op(*values)
        return list(results) if isinstance(results, (list, tuple)) else [results]

    def _symbolic_dims(self):
        dims = {}
        for name, source in zip(self.graph.symbol.list_inputs(), self.graph.inputs):
            if isinstance(source, ArenaInput):
                dims[name] = {0: "arena%d_rows" % source.arena.number}
            elif self.graph.batched and isinstance(source, RowsInput):
                dims[name] = {1: "nodes"}
            elif self.graph.batched and isinstance(source, OwnInput):
                dims[name] = {0: "nodes"}
        return dims


def _stacked(arrays):
    """A group's arrays (or numpy data, from numbers of the structure) along axis 0."""
    if isinstance(arrays[0], np.ndarray):
        return mx.nd.array(np.concatenate(arrays), dtype=arrays[0].dtype)
    return arrays[0] if len(arrays) == 1 else mx.nd.concat(*arrays, dim=0)


def run_groups(groups, zeros_of, runner_of):
    """Runs `groups` in order; returns the last one's (the entry's) outputs.
    `zeros_of(arena)` gives an arena's first arrays (a row of zeros each),
    `runner_of(body)` the GraphRunner of a body."""
    arenas = {}
    for group in groups:
        graph = group.body.graph
        values = []
        for source in graph.inputs:
            if isinstance(source, ArenaInput):
                if source.arena not in arenas:
                    arenas[source.arena] = zeros_of(source.arena)
                values.append(arenas[source.arena][source.index])
            elif isinstance(source, RowsInput):
                values.append(group.rows)
            elif isinstance(source, OwnInput):
                values.append(_stacked([invocation.arrays[source.index]
                                        for invocation in group.invocations]))
            else:
                values.append(source.value(None, None))
        results = runner_of(group.body)(values)
        if graph.appends_to is not None:
            arenas[graph.appends_to] = results
    return results
