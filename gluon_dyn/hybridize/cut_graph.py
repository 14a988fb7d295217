"""A graph cut at its data-dependent shapes, run as static parts around them.

MXNet plans a graph's memory only when it can infer every shape before the graph
runs, and a boolean_mask's (nonzero's, unique's) output shape is known only once
it ran. As the MXNet control-flow proposal's "dynamic shape inference and
execution" does, the graph is cut before and after each such operator: the parts
between them run as CachedOps with memory planned (static_alloc: a call whose
shapes fit the previous allocation reuses it; other shapes are inferred right
before the part runs, from the arrays the parts before it produced), and each
data-dependent operator runs alone on the real shapes. Every part is built once,
for every size.
"""
import dataclasses
import json

import mxnet as mx

from .. import graph_json


@dataclasses.dataclass
class _Part:
    planned: mx.nd.CachedOp    # static_alloc; a lone data-dependent operator: no plan
    unplanned: mx.nd.CachedOp  # for empty arrays, which static_alloc cannot hold
    reads: list                # value refs ((node, output)) the part takes, in order
    gives: list                # value refs it produces, in order


class CutGraph:
    """Called like a CachedOp of `symbol` (inputs in `symbol.list_inputs()` order,
    a list of outputs); `recording` graphs plan no memory (see executor.py)."""

    def __init__(self, symbol, recording=False):
        graph = json.loads(symbol.tojson())
        nodes = graph["nodes"]
        alone = {k for k, node in enumerate(nodes)
                 if node["op"] in graph_json.DATA_DEPENDENT_SHAPE_OPS}
        variables = {node["name"]: k for k, node in enumerate(nodes) if node["op"] == "null"}
        self._inputs = [(variables[name], 0) for name in symbol.list_inputs()]
        self._heads = [(i, o) for i, o, _ in graph["heads"]]
        groups = graph_json.groups_between(graph, alone)
        self.parts = []
        for group, (reads, gives) in zip(groups, graph_json.group_boundaries(graph, groups)):
            part = graph_json.group_symbol(graph, group, reads, gives)
            unplanned = mx.nd.CachedOp(part)
            planned = unplanned if recording or group[0] in alone else mx.nd.CachedOp(
                part, flags=[("static_alloc", True)])
            self.parts.append(_Part(planned, unplanned, reads, gives))

    def __call__(self, *inputs):
        values = dict(zip(self._inputs, inputs))
        for part in self.parts:
            arrays = [values[ref] for ref in part.reads]
            op = part.unplanned if any(a.size == 0 for a in arrays) else part.planned
            results = op(*arrays)
            values.update(zip(part.gives, results if isinstance(results, list) else [results]))
        return [values[ref] for ref in self._heads]
