"""Relax modules for TVM segments and for whole convertible graphs.

Weights are function parameters, never constants: one compiled module then
serves parameters that training keeps updating. A segment told which of its
inputs are parameters takes its data first and marks where the parameters
start ("num_input"): compiler.py then prepares what depends on parameters only
(transposes, packed weights) in a function run when they change.
"""
from tvm import relax

from .emitter import Context, convert_node
from .graph import load_graph
from .partition import TVM, partition
from .value_types import ShapeEnv, relax_type

ENTRY = "main"


def _build(graph, nodes, inputs, input_types, outputs, num_data=None):
    """A module whose ``main`` maps the ``inputs`` values to a tuple of ``outputs``;
    with ``num_data``, the inputs after the first ``num_data`` are parameters."""
    dim_vars = {}
    params = [relax.Var(graph.value_name(ref), relax_type(vt, dim_vars))
              for ref, vt in zip(inputs, input_types)]
    values = dict(zip(inputs, params))
    bb = relax.BlockBuilder()
    attrs = None if num_data is None else {"num_input": num_data}
    with bb.function(ENTRY, params, attrs=attrs):
        ctx = Context(bb)
        for index in nodes:
            node = graph.nodes[index]
            results = convert_node(ctx, node, [values[ref] for ref in node.inputs])
            values.update(((index, k), out) for k, out in enumerate(results))
        bb.emit_func_output(relax.Tuple([values[ref] for ref in outputs]))
    # The work between relax.If nodes as dataflow blocks, which fusion needs.
    return relax.transform.ConvertToDataflow()(bb.get())


def build_segment(graph, segment, input_shapes, input_dtypes=None, symbolic_dims=None,
                  parameters=None):
    """``(IRModule, input_order, output_order)`` of a TVM segment from ``partition``.

    ``main`` takes the segment's inputs in ``input_order`` (value refs: those of
    ``segment.inputs``, in that order, except that graph variables named in
    ``parameters`` come last, marked as parameters) and returns a tuple of the
    values in ``output_order`` (``segment.outputs``). Graph variables take their
    types from ``input_shapes``/``input_dtypes``/``symbolic_dims``; values from
    other segments take the types found when partitioning.
    """
    if segment.kind != TVM:
        raise ValueError("build_segment: %r runs in MXNet, not TVM" % (segment,))
    env = ShapeEnv(graph, input_shapes, input_dtypes, symbolic_dims)
    typed = [(ref, env.input_types[graph.nodes[ref[0]].name] if graph.nodes[ref[0]].is_variable
              else vt) for ref, vt in zip(segment.inputs, segment.input_types)]
    is_parameter = [graph.nodes[i].is_variable and graph.nodes[i].name in (parameters or ())
                    for i, _ in segment.inputs]
    ordered = ([entry for entry, param in zip(typed, is_parameter) if not param]
               + [entry for entry, param in zip(typed, is_parameter) if param])
    inputs = [ref for ref, _ in ordered]
    mod = _build(graph, segment.nodes, inputs, [vt for _, vt in ordered], segment.outputs,
                 num_data=len(inputs) - sum(is_parameter) if any(is_parameter) else None)
    return mod, inputs, list(segment.outputs)


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
