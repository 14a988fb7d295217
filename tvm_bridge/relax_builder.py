"""Relax modules for TVM segments and for whole convertible graphs.

Weights are function parameters, never constants: one compiled module then
serves parameters that training keeps updating.
"""
from tvm import relax

from .emitter import Context, convert_node
from .graph import load_graph
from .partition import TVM, partition
from .value_types import ShapeEnv, relax_type

ENTRY = "main"


def _build(graph, nodes, inputs, input_types, outputs):
    """A module whose ``main`` maps the ``inputs`` values to a tuple of ``outputs``."""
    dim_vars = {}
    params = [relax.Var(graph.value_name(ref), relax_type(vt, dim_vars))
              for ref, vt in zip(inputs, input_types)]
    values = dict(zip(inputs, params))
    bb = relax.BlockBuilder()
    with bb.function(ENTRY, params):
        with bb.dataflow():
            ctx = Context(bb)
            for index in nodes:
                node = graph.nodes[index]
                results = convert_node(ctx, node, [values[ref] for ref in node.inputs])
                values.update(((index, k), out) for k, out in enumerate(results))
            result = bb.emit_output(relax.Tuple([values[ref] for ref in outputs]))
        bb.emit_func_output(result)
    return bb.get()


def build_segment(graph, segment, input_shapes, input_dtypes=None, symbolic_dims=None):
    """``(IRModule, input_order, output_order)`` of a TVM segment from ``partition``.

    ``main`` takes the segment's inputs in ``input_order`` (value refs, equal to
    ``segment.inputs``) and returns a tuple of the values in ``output_order``
    (``segment.outputs``). Graph variables take their types from
    ``input_shapes``/``input_dtypes``/``symbolic_dims``; values from other
    segments take the types found when partitioning.
    """
    if segment.kind != TVM:
        raise ValueError("build_segment: %r runs in MXNet, not TVM" % (segment,))
    env = ShapeEnv(graph, input_shapes, input_dtypes, symbolic_dims)
    input_types = [env.input_types[graph.nodes[i].name] if graph.nodes[i].is_variable else vt
                   for (i, _), vt in zip(segment.inputs, segment.input_types)]
    mod = _build(graph, segment.nodes, segment.inputs, input_types, segment.outputs)
    return mod, list(segment.inputs), list(segment.outputs)


def build_graph_module(symbol, input_shapes, input_dtypes=None, symbolic_dims=None):
    """``(IRModule, input_names, output_names)`` of a graph that converts entirely.

    ``main`` takes every graph input (arguments and auxiliary states, in
    ``input_names`` order) and returns a tuple of all graph outputs (in the
    order of ``output_names``, MXNet's ``list_outputs``). Raises ValueError
    naming the ops that do not convert.
    """
    graph = load_graph(symbol)
    segments = partition(graph, input_shapes, input_dtypes, symbolic_dims)
    blocking = [reason for seg in segments if seg.kind != TVM for reason in seg.reasons]
    if blocking:
        raise ValueError("the graph does not convert to TVM entirely: " + "; ".join(blocking))
    env = ShapeEnv(graph, input_shapes, input_dtypes, symbolic_dims)
    names = graph.input_names
    inputs = [(graph.variable_index[name], 0) for name in names]
    nodes = [index for seg in segments for index in seg.nodes]
    mod = _build(graph, sorted(nodes), inputs, [env.input_types[n] for n in names], graph.heads)
    return mod, names, graph.to_symbol().list_outputs()
