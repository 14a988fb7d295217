"""Splitting a graph into TVM-convertible segments and single-op MXNet segments.

Every non-variable node is probed: its converter runs on a scratch Relax
function whose parameters have the node's input types. A node whose converter
is missing or declines (``Unsupported``: an expected graph break) runs in MXNet
as a segment of its own; so does one whose converter fails otherwise (a bug in
the converter, or Relax rejecting what it built), and its segment names the
failure (``Segment.failure``), to be reported, not read as unsupported.
Convertible nodes are grouped by *stage*: the number of MXNet segments on the
longest path before them. Nodes of one stage form one TVM
segment; since a path leaving a TVM segment through an MXNet node always
reaches a later stage, no TVM segment both feeds and depends on an MXNet one.
Outputs of MXNet nodes that MXNet cannot infer (value_types.py) are typed by
running the graph on example inputs (observed_types.py); a TVM segment lists
the inputs so typed, to be checked at each call.
"""
from dataclasses import dataclass

from gluon_dyn.graph_json import (group_boundaries, group_symbol, groups_between,
                                   value_input_name)
from tvm import relax

from .converters import Unsupported
from .emitter import Context, convert_node
from .failures import describe
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
    failure: str = ""  # an MXNet node whose converter failed: the error ("TypeError: ...")

    @property
    def reason(self):
        """The reasons as one string."""
        return "; ".join(self.reasons)

    def input_names(self, graph):
        """A unique name per input: a variable's own name, else the producer's output."""
        return [value_input_name(graph.json, ref) for ref in self.inputs]

    def to_symbol(self, graph):
        """An mx.sym.Symbol of just this segment (for a CachedOp).

        Its variables are named by ``input_names(graph)`` (aligned with
        ``inputs``) and its outputs are ``outputs`` in order.
        """
        return group_symbol(graph.json, self.nodes, self.inputs, self.outputs)

    def __repr__(self):
        return "Segment(%s, %d nodes, %d inputs, %d outputs)" % (
            self.kind, len(self.nodes), len(self.inputs), len(self.outputs))


class ConverterFailed(Unsupported):
    """A converter raised an error other than Unsupported: MXNet runs the node, and
    the failure is reported (it is a bug to fix, not a graph break)."""

    def __init__(self, error):
        self.error = describe(error)
        super().__init__("converter failed: %s" % self.error)


def _probe(node, input_types):
    """The Relax types of a node's outputs (None where not produced), or Unsupported
    (ConverterFailed when the converter raised something else)."""
    params = [relax.Var("in%d" % k, ty) for k, ty in enumerate(input_types)]
    bb = relax.BlockBuilder()
    error = None
    with bb.function("probe", params):
        try:
            outputs = convert_node(Context(bb), node, params)
        except Unsupported as err:
            error, outputs = err, []
        except Exception as err:  # noqa: BLE001 - MXNet still runs the node, reported
            error, outputs = ConverterFailed(err), []
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
        self.failures = {}  # node index -> how its converter failed (ConverterFailed)
        self.used = set(graph.consumers()) | set(graph.heads)
        self._mxnet_types = {}
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
            if isinstance(err, ConverterFailed):
                self.failures[index] = err.error
            return
        self.types.update(((index, k), ty) for k, ty in enumerate(output_types) if ty is not None)

    def _type(self, ref):
        """The Relax type of a value; for outputs of MXNet nodes, MXNet's inference
        (or, for a graph typed by running, one run for every value read)."""
        if ref not in self.types:
            if ref not in self._mxnet_types:
                wanted = sorted(r for r in self.used if not self.graph.nodes[r[0]].is_variable) \
                    if self.env.types_by_running else [ref]
                self._mxnet_types.update(self.env.mxnet_types(wanted))
            self.types[ref] = relax_type(self._mxnet_types[ref], self.dim_vars)
        return self.types[ref]

    def input_type(self, ref):
        """The ValueType of a value a segment reads."""
        return from_relax_type(self._type(ref), self.graph.value_name(ref))


def _segments(graph, groups, analysis):
    readers = graph.consumers()
    segments = []
    for nodes, (inputs, outputs) in zip(groups, group_boundaries(graph.json, groups)):
        if nodes[0] in analysis.reasons:
            kind, reasons = MXNET, [analysis.reasons[nodes[0]]]
        else:
            neighbours = {i for i, _ in inputs} | {r for ref in outputs for r in readers.get(ref, ())}
            kind, reasons = TVM, [analysis.reasons[i] for i in sorted(neighbours)
                                  if i in analysis.reasons]
        segments.append(Segment(kind, nodes, inputs, outputs,
                                [analysis.input_type(ref) for ref in inputs], reasons,
                                [k for k, ref in enumerate(inputs) if ref in analysis.env.observed],
                                analysis.failures.get(nodes[0], "")))
    return segments


def partition(graph, input_shapes, input_dtypes=None, symbolic_dims=None, example_inputs=None):
    """Segments of ``graph`` in execution order (see the module docstring).

    ``example_inputs`` ({input name: NDArray}) are needed for a graph holding
    _cond/_while_loop: the values after them are typed by running it on them.
    """
    env = ShapeEnv(graph, input_shapes, input_dtypes, symbolic_dims, example_inputs)
    analysis = _Analysis(graph, env)
    return _segments(graph, groups_between(graph.json, set(analysis.reasons)), analysis)
