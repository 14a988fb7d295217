"""A graph cut at its data-dependent shapes, run as static parts around them.

MXNet plans a graph's memory only when it can infer every shape before the graph
runs, and a boolean_mask's (nonzero's, unique's) output shape is known only once
it ran. As the MXNet control-flow proposal's "dynamic shape inference and
execution" does, the graph is cut before and after each such operator at the top
level: the parts between them run as CachedOps with memory planned (static_alloc:
a call whose shapes equal the previous call's runs on the same buffers and
executors; other shapes are inferred right before the part runs, from the arrays
the parts before it produced, and MXNet's planner takes each buffer from the
part's pool when one at least as large is there), and each data-dependent
operator runs alone on the real shapes. Every part is built once, for every
size; `report()` counts the CachedOps built and the calls.

A top-level `cond` of such a graph is cut out too and run by Python: its
predicate's graph, a read of the predicate (the graph waits for shapes anyway),
then the taken branch's graph as a part of its own. MXNet's `_cond` operator
costs ~150 us a call on this machine where this costs ~50, and a branch never
taken is never built.

Recorded runs (training) plan a static part's memory too, its graph rewritten
so MXNet 1.9.1's planned backward sums no gradient in place (gradient_sums.py),
and give the lone operator its non-differentiable inputs (a mask) detached: MXNet 1.9.1
crashes (SIGSEGV) in a backward through a boolean_mask whose mask is recorded,
and no gradient flows to a mask anyway.
"""
import json

import mxnet as mx
from mxnet import autograd

from ... import graph_json
from ...ops.check import SOURCE_ATTR
from ...ops.gradient_flow import NON_DIFFERENTIABLE_INPUTS
from ..passes import gradient_sums

_ANCHOR = "gluon_dyn_anchor"


class _Part:
    """One part: a static group of nodes, a lone data-dependent operator, or a branch
    of a cond, with the value refs ((node, output)) it reads, in its CachedOp's
    input order, and gives. `anchor`: a value to read when the part reads none (a
    CachedOp needs an input: the part then has it as an extra output, unused)."""

    def __init__(self, symbol, reads, gives, anchor, lone_op=None):
        if not reads:
            symbol = mx.sym.Group(list(symbol) + [mx.sym.BlockGrad(mx.sym.var(_ANCHOR))])
            reads = [anchor]
        self.symbol, self.reads, self.gives = symbol, reads, gives
        self.lone_op = lone_op          # the data-dependent operator's name, or None
        # static_alloc, for a static part (never with a mask inside).
        self.planned = lone_op is None and not graph_json.holds_ops(
            symbol, graph_json.DATA_DEPENDENT_SHAPE_OPS)
        self.detached = NON_DIFFERENTIABLE_INPUTS.get(lone_op, ())
        self.ops = {}                   # (planned, recording) -> CachedOp, built when first run
        self.builds = 0
        self.calls = 0

    def op(self, planned, recording):
        kind = (planned and self.planned, recording)
        if kind not in self.ops:
            symbol, flags = self.symbol, []
            if kind == (True, True):
                symbol, flags = gradient_sums.planned_recording(symbol, [("static_alloc", True)])
            elif kind[0]:
                flags = [("static_alloc", True)]
            self.ops[kind] = mx.nd.CachedOp(symbol, flags=flags)
            self.builds += 1
        return self.ops[kind]

    def run(self, values, recording):
        self.calls += 1
        arrays = [values[ref] for ref in self.reads]
        if self.lone_op is not None:
            arrays = [a.detach() if recording and k in self.detached else a
                      for k, a in enumerate(arrays)]
        # An empty array (a mask that kept no rows) has an unknown shape to MXNet
        # 1.9.1, which static_alloc cannot plan for: such a call runs unplanned.
        planned = all(a.size for a in arrays)
        results = self.op(planned, recording)(*arrays)
        results = results if isinstance(results, list) else [results]
        if self.lone_op is not None:
            # Its output shapes are known once it ran: the next part's shapes are
            # inferred from them.
            for result in results:
                result.wait_to_read()
        return results

    def report(self):
        kind = ("data-dependent" if self.lone_op else "static, memory planned" if self.planned
                else "static, shapes inferred per node (a data-dependent shape in control flow)")
        ops = {}
        for node in json.loads(self.symbol.tojson())["nodes"]:
            if node["op"] != "null":
                ops[node["op"]] = ops.get(node["op"], 0) + 1
        return {"kind": kind, "ops": dict(sorted(ops.items())), "cachedops_built": self.builds,
                "calls": self.calls}


class _CondPart:
    """A top-level `_cond` node run by Python: its predicate's graph, then the taken
    branch's, each a _Part reading the node's inputs at its locations."""

    def __init__(self, node, gives, anchor):
        attrs, inputs = node["attrs"], [tuple(entry[:2]) for entry in node["inputs"]]
        self.gives, self.calls = gives, 0
        self.where = attrs.get(SOURCE_ATTR, node["name"])
        self.cond, self.then, self.else_ = (
            _Part(symbol, [inputs[k] for k in json.loads(attrs[locs])], gives, anchor)
            for symbol, locs in zip(map(graph_json.load_symbol, node["subgraphs"]),
                                    ("cond_input_locs", "then_input_locs", "else_input_locs")))

    def run(self, values, recording):
        self.calls += 1
        with autograd.pause():
            taken = self.cond.run(values, False)[0].asscalar() != 0
        results = (self.then if taken else self.else_).run(values, recording)
        # The outputs read after it (`gives`: the node's, by index), in that order.
        return [results[output] for _, output in self.gives]

    def report(self):
        return {"kind": "cond at %s, run by Python" % self.where, "calls": self.calls,
                "cond": self.cond.report(), "then": self.then.report(),
                "else": self.else_.report()}


class CutGraph:
    """Called like a CachedOp of `symbol` (inputs in `symbol.list_inputs()` order;
    returns the list of outputs). `recording`: the parts run under autograd."""

    def __init__(self, symbol, recording=False):
        graph = json.loads(symbol.tojson())
        nodes = graph["nodes"]
        alone = {k for k, node in enumerate(nodes)
                 if node["op"] in graph_json.DATA_DEPENDENT_SHAPE_OPS + ("_cond",)}
        variables = {node["name"]: k for k, node in enumerate(nodes) if node["op"] == "null"}
        self.recording = recording
        self._inputs = [(variables[name], 0) for name in symbol.list_inputs()]
        self._heads = [(i, o) for i, o, _ in graph["heads"]]
        groups = graph_json.groups_between(graph, alone)
        self.parts = []
        for group, (reads, gives) in zip(groups, graph_json.group_boundaries(graph, groups)):
            node = nodes[group[0]]
            if node["op"] == "_cond":
                self.parts.append(_CondPart(node, gives, self._inputs[0]))
                continue
            part = graph_json.group_symbol(graph, group, reads, gives)
            by_name = {graph_json.value_input_name(graph, ref): ref for ref in reads}
            self.parts.append(_Part(part, [by_name[name] for name in part.list_inputs()], gives,
                                    self._inputs[0], node["op"] if group[0] in alone else None))

    def __call__(self, *inputs):
        values = dict(zip(self._inputs, inputs))
        for part in self.parts:
            # A part with an anchor gives one result more than it has values for.
            values.update(zip(part.gives, part.run(values, self.recording)))
        return [values[ref] for ref in self._heads]

    def report(self):
        return [part.report() for part in self.parts]
