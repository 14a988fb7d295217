"""Writing a SegmentedGraph's plan for deploy_loader.py (see its docstring for the files)."""
import json
import os

from . import deploy
from .deploy_loader import PLAN_FORMAT, PLAN_KIND, PLAN_SUFFIX


def export_plan(plan, prefix, data_names, returns_list, parameters_file):
    """Write prefix-plan.json and prefix-segment<k>-tvm.so (+ .json) per TVM step of
    `plan` (a SegmentedGraph); returns the manifest's path.

    `data_names` are the graph inputs the caller passes (the rest come from
    `parameters_file`, an MXNet .params file beside the manifest);
    `returns_list` says whether the caller gets a list or a single array.
    """
    graph = plan.graph
    checked = [number for number, step in enumerate(plan.steps)
               if step.backend == "tvm" and step.segment.observed_inputs]
    if checked and not plan.uses_whole_graph:
        # deploy_loader has no whole graph to run a call whose checked types differ.
        raise ValueError("the plan cannot be exported: TVM step(s) %s read values typed by "
                         "running the graph (after _cond/_while_loop), which only the "
                         "SegmentedGraph checks at each call" % checked)
    if plan.uses_whole_graph:
        steps = [{"backend": "mxnet", "ops": sum(not n.is_variable for n in graph.nodes),
                  "inputs": plan.symbol.list_inputs(),
                  "outputs": [_value_name(graph, ref) for ref in graph.heads],
                  "symbol": json.loads(plan.symbol.tojson())}]
    else:
        steps = [_step_entry(graph, step, "%s-segment%d" % (prefix, number))
                 for number, step in enumerate(plan.steps)]
    manifest = {"kind": PLAN_KIND, "format": PLAN_FORMAT,
                "parameters": os.path.basename(parameters_file),
                "data_inputs": list(data_names), "returns": "list" if returns_list else "array",
                "static_shape": plan.static_shape, "steps": steps,
                "outputs": [_value_name(graph, ref) for ref in graph.heads]}
    path = prefix + PLAN_SUFFIX
    with open(path, "w") as f:
        json.dump(manifest, f, indent=1)
    return path


def _step_entry(graph, step, library_prefix):
    entry = {"backend": step.backend, "ops": len(step.segment.nodes)}
    if step.backend == "tvm":
        library, signature = deploy.export(step.function, library_prefix)
        return dict(entry, inputs=[_value_name(graph, ref) for ref in step.input_order],
                    outputs=[_value_name(graph, ref) for ref in step.output_order],
                    library=os.path.basename(library), signature=os.path.basename(signature))
    # The segment's symbol names its inputs as _value_name does (Segment.input_names).
    return dict(entry, inputs=step.symbol.list_inputs(),
                outputs=[_value_name(graph, ref) for ref in step.segment.outputs],
                symbol=json.loads(step.symbol.tojson()))


def _value_name(graph, ref):
    node_index, output = ref
    node = graph.nodes[node_index]
    return node.name if node.is_variable else "%s_output%d" % (node.name, output)
