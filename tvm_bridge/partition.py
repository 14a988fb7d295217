"""Splitting a graph into TVM-convertible segments and single-op MXNet segments.

Every non-variable node is probed: its converter runs on a scratch Relax
function whose parameters have the node's input types. A node whose converter
is missing or declines (``Unsupported``), or fails, runs in MXNet as a segment
of its own. Convertible nodes are grouped by *stage*: the number of MXNet
segments on the longest path before them. Nodes of one stage form one TVM
segment; since a path leaving a TVM segment through an MXNet node always
reaches a later stage, no TVM segment both feeds and depends on an MXNet one.
In a graph holding _cond/_while_loop, the outputs of MXNet nodes are typed by
running the graph on example inputs (observed_types.py); a TVM segment lists
the inputs so typed, to be checked at each call.
"""
from dataclasses import dataclass

from tvm import relax

from .converters import Unsupported
from .emitter import Context, convert_node
from .graph import Node, symbol_from_dict
from .value_types import ShapeEnv, from_relax_type, relax_type

TVM, MXNET = "tvm", "mxnet"


@dataclass(repr=False)
class Segment:
    """Consecutive work for one runtime."""

    kind: str  # TVM or MXNET
    nodes: list  # graph node indices, topological order
    inputs: list  # value refs read from graph variables or earlier segments
    outputs: list  # value refs that later segments or the graph heads read
    input_types: list  # a ValueType per input
    reasons: list  # why this segment's boundaries are where they are
    observed_inputs: list  # positions of inputs typed by running the graph, not inferred

    @property
    def reason(self):
        """The reasons as one string."""
        return "; ".join(self.reasons)

    def input_names(self, graph):
        """A unique name per input: a variable's own name, else the producer's output."""
        return [graph.nodes[i].name if graph.nodes[i].is_variable else
                "%s_output%d" % (graph.nodes[i].name, o) for i, o in self.inputs]

    def to_symbol(self, graph):
        """An mx.sym.Symbol of just this segment (for a CachedOp).

        Its variables are named by ``input_names(graph)`` (aligned with
        ``inputs``) and its outputs are ``outputs`` in order.
        """
        placeholders = [graph.nodes[i] if graph.nodes[i].is_variable else
                        Node("null", name, {}, [], 1, []) for (i, _), name in
                        zip(self.inputs, self.input_names(graph))]
        position = {ref: (k, 0) for k, ref in enumerate(self.inputs)}
        entries = [p.to_json([]) for p in placeholders]
        for index in self.nodes:
            node = graph.nodes[index]
            entries.append(node.to_json([position[ref] for ref in node.inputs]))
            position.update({(index, o): (len(entries) - 1, o) for o in range(node.num_outputs)})
        return symbol_from_dict({
            "nodes": entries, "arg_nodes": list(range(len(placeholders))),
            "node_row_ptr": _row_pointers(placeholders + [graph.nodes[i] for i in self.nodes]),
            "heads": [[*position[ref], 0] for ref in self.outputs]})

    def __repr__(self):
        return "Segment(%s, %d nodes, %d inputs, %d outputs)" % (
            self.kind, len(self.nodes), len(self.inputs), len(self.outputs))


def _row_pointers(nodes):
    pointers = [0]
    for node in nodes:
        pointers.append(pointers[-1] + node.num_outputs)
    return pointers


def _probe(node, input_types):
    """The Relax types of a node's outputs (None where not produced), or Unsupported."""
    params = [relax.Var("in%d" % k, ty) for k, ty in enumerate(input_types)]
    bb = relax.BlockBuilder()
    error = None
    with bb.function("probe", params):
        try:
            outputs = convert_node(Context(bb), node, params)
        except Unsupported as err:
            error, outputs = err, []
        except Exception as err:  # e.g. Relax rejecting an op: MXNet still runs the node
            error, outputs = Unsupported("converter failed: %s" % err), []
        bb.emit_func_output(relax.Tuple([out for out in outputs if out is not None]))
    if error is not None:
        raise error
    return [None if out is None else out.ty for out in outputs]


class _Analysis:
    """Types of all values and the kind of every node."""

    def __init__(self, graph, env):
        self.graph = graph
        self.env = env
        self.dim_vars = {}
        self.types = {(graph.variable_index[name], 0): relax_type(vt, self.dim_vars)
                      for name, vt in env.input_types.items()}
        self.reasons = {}  # node index -> why it runs in MXNet
        self.observed = set()  # values typed by running the graph on example inputs
        self.used = set(graph.consumers()) | set(graph.heads)
        self._mxnet_types = None
        for index, node in enumerate(graph.nodes):
            if not node.is_variable:
                self._classify(index, node)

    def _classify(self, index, node):
        input_types = [self._type(ref) for ref in node.inputs]
        try:
            output_types = _probe(node, input_types)
            missing = [k for k, ty in enumerate(output_types)
                       if ty is None and (index, k) in self.used]
            if missing:
                raise Unsupported("output(s) %s are read but not produced by the converter" % (
                    ", ".join(map(str, missing))))
        except Unsupported as err:
            self.reasons[index] = "op %r (%s): %s" % (node.op, node.name, err)
            return
        self.types.update(((index, k), ty) for k, ty in enumerate(output_types) if ty is not None)

    def _type(self, ref):
        """The Relax type of a value; for outputs of MXNet nodes, MXNet's inference
        (run once, for every value read)."""
        if ref not in self.types:
            if self._mxnet_types is None:
                node_outputs = sorted(r for r in self.used
                                      if not self.graph.nodes[r[0]].is_variable)
                self._mxnet_types = self.env.mxnet_types(node_outputs)
            self.types[ref] = relax_type(self._mxnet_types[ref], self.dim_vars)
            if self.env.types_by_running:
                self.observed.add(ref)
        return self.types[ref]

    def input_type(self, ref):
        """The ValueType of a value a segment reads."""
        return from_relax_type(self._type(ref), self.graph.value_name(ref))


def _group_nodes(graph, runs_in_mxnet):
    """Node index lists, one per segment, in execution order.

    A node's stage counts the MXNet nodes on the longest path to it (an MXNet
    node counts itself); convertible nodes of one stage form one group.
    """
    stages = {}
    for index, node in enumerate(graph.nodes):
        if node.is_variable:
            continue
        mxnet_here = index in runs_in_mxnet
        stages[index] = max((stages[i] + (mxnet_here or i in runs_in_mxnet)
                             for i, _ in node.inputs if i in stages), default=0)
    groups = {}
    for index, stage in stages.items():
        key = (stage, index) if index in runs_in_mxnet else (stage, -1)
        groups.setdefault(key, []).append(index)
    # Groups of one stage are independent of each other; order them by first node.
    return sorted(groups.values(), key=lambda nodes: (stages[nodes[0]], nodes[0]))


def _segments(graph, groups, analysis):
    owner = {index: k for k, nodes in enumerate(groups) for index in nodes}
    readers = graph.consumers()
    heads = set(graph.heads)
    segments = []
    for k, nodes in enumerate(groups):
        inputs = []
        for index in nodes:
            inputs.extend(ref for ref in graph.nodes[index].inputs
                          if owner.get(ref[0]) != k and ref not in inputs)
        outputs = [(index, o) for index in nodes for o in range(graph.nodes[index].num_outputs)
                   if (index, o) in heads or any(owner[r] != k for r in readers.get((index, o), ()))]
        if nodes[0] in analysis.reasons:
            kind, reasons = MXNET, [analysis.reasons[nodes[0]]]
        else:
            neighbours = {i for i, _ in inputs} | {r for ref in outputs for r in readers.get(ref, ())}
            kind, reasons = TVM, [analysis.reasons[i] for i in sorted(neighbours)
                                  if i in analysis.reasons]
        segments.append(Segment(kind, nodes, inputs, outputs,
                                [analysis.input_type(ref) for ref in inputs], reasons,
                                [k for k, ref in enumerate(inputs) if ref in analysis.observed]))
    return segments


def partition(graph, input_shapes, input_dtypes=None, symbolic_dims=None, example_inputs=None):
    """Segments of ``graph`` in execution order (see the module docstring).

    ``example_inputs`` ({input name: NDArray}) are needed for a graph holding
    _cond/_while_loop: the values after them are typed by running it on them.
    """
    env = ShapeEnv(graph, input_shapes, input_dtypes, symbolic_dims, example_inputs)
    analysis = _Analysis(graph, env)
    return _segments(graph, _group_nodes(graph, set(analysis.reasons)), analysis)
