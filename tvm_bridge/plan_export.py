"""Writing a SegmentedGraph's plan for deploy_loader.py and the C runtime (see deploy_loader's
docstring for the files)."""
import json
import os
import zlib

from gluon_dyn.graph_files.strip import strip_training_ops
from gluon_dyn.graph_json import load_symbol

from . import deploy
from .deploy_loader import PLAN_KIND, PLAN_SUFFIX, PLAN_VERSION


def export_plan(plan, prefix, data_names, returns_list, parameters_file, symbol_file):
    """Write prefix-plan.json and prefix-segment<k>-tvm.so (+ .json) per TVM step of
    `plan` (a SegmentedGraph); returns the manifest's path.

    `data_names` are the graph inputs the caller passes (the rest come from
    `parameters_file`, an MXNet .params file beside the manifest); `symbol_file` is
    the whole graph exported beside it, which runs the calls whose types differ from
    those the TVM steps were compiled for; `returns_list` says whether the caller
    gets a list or a single array.
    """
    graph = plan.graph
    if plan.uses_whole_graph:
        steps = [dict(_mxnet_graph(plan.whole_symbol), backend="mxnet",
                      ops=sum(not n.is_variable for n in graph.nodes),
                      outputs=[_value_name(graph, ref) for ref in graph.heads])]
    else:
        steps = [_step_entry(graph, step, "%s-segment%d" % (prefix, number))
                 for number, step in enumerate(plan.steps)]
    manifest = {"kind": PLAN_KIND, "version": PLAN_VERSION,
                "parameters": os.path.basename(parameters_file),
                "graph": os.path.basename(symbol_file),
                "data_inputs": list(data_names), "returns": "list" if returns_list else "array",
                "static_shape": plan.static_shape, "steps": steps,
                "outputs": [_value_name(graph, ref) for ref in graph.heads]}
    path = prefix + PLAN_SUFFIX
    with open(path, "w") as f:
        json.dump(manifest, f, indent=1)
    return path


def _mxnet_graph(symbol):
    """A step's graph without training-only nodes, as the exported graph has none, and
    the inputs it takes (those nodes' removal may drop some)."""
    stripped = strip_training_ops(json.loads(symbol.tojson()))
    return {"inputs": load_symbol(stripped).list_inputs(), "symbol": stripped}


def _step_entry(graph, step, library_prefix):
    # A step numpy runs in the plan (host_ops.py) is written as the MXNet graph it is.
    entry = {"backend": "tvm" if step.backend == "tvm" else "mxnet",
             "ops": len(step.segment.nodes)}
    if step.backend == "tvm":
        library, signature = deploy.export(step.function, library_prefix)
        with open(library, "rb") as f:
            content = f.read()
        # Loading a truncated or damaged shared library can crash the process (SIGBUS in
        # the dynamic loader): the loaders compare size and checksum first.
        return dict(entry, inputs=[_value_name(graph, ref) for ref in step.input_order],
                    outputs=[_value_name(graph, ref) for ref in step.output_order],
                    library=os.path.basename(library), signature=os.path.basename(signature),
                    library_bytes=len(content), library_crc32=zlib.crc32(content))
    # The segment's symbol names its inputs as _value_name does (Segment.input_names).
    return dict(entry, outputs=[_value_name(graph, ref) for ref in step.segment.outputs],
                **_mxnet_graph(step.symbol))


def _value_name(graph, ref):
    node_index, output = ref
    node = graph.nodes[node_index]
    return node.name if node.is_variable else "%s_output%d" % (node.name, output)
