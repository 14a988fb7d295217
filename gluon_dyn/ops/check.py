"""Checks of a built graph that need shapes, which a traced graph does not have.

`cond` on Symbols is traced before any shape is known, and MXNet 1.9.1's `_cond`
has no shape inference of its own: branches that return differently shaped
outputs would make a graph whose output shape depends on the branch taken. Once
the input shapes are known (when Gluon builds its cached graph), every `_cond`
whose inputs can be inferred is checked branch against branch, recursively.
"""
import json

import mxnet as mx
import numpy as np

from ..graph_json import holds_ops, load_symbol
from .structure import ControlFlowError

SOURCE_ATTR = "__gluon_dyn_source__"
_BRANCHES = ((1, "then_input_locs", "then_func"), (2, "else_input_locs", "else_func"))


def check_cond_branches(symbol, shapes, dtypes):
    """Raise ControlFlowError where a `_cond` node's branches disagree on an output's
    shape or dtype, given the shapes and dtypes (by input name) of `symbol`'s inputs."""
    _check_graph(json.loads(symbol.tojson()), shapes, dtypes)


def _entry_attrs(entries, shapes, dtypes):
    """Shape and dtype (None where unknown) of each Symbol in `entries`.

    Only what feeds `entries` is inferred, so a conflict further down the graph
    (perhaps the very one being looked for) does not hide them.
    """
    group = mx.sym.Group(entries)
    names = set(group.list_inputs())
    _, out_shapes, _ = group.infer_shape_partial(**{k: v for k, v in shapes.items() if k in names})
    try:
        _, out_types, _ = group.infer_type_partial(**{k: v for k, v in dtypes.items() if k in names})
    except mx.base.MXNetError:
        out_types = [None] * len(entries)
    return [(tuple(s) if s and 0 not in s else None, t) for s, t in zip(out_shapes, out_types)]


def _check_graph(graph, shapes, dtypes):
    nodes = graph["nodes"]
    if not holds_ops(graph, ("_cond",)):
        return
    internals = load_symbol(graph).get_internals()
    row = graph["node_row_ptr"]
    for node in nodes:
        if node["op"] not in ("_cond", "_foreach", "_while_loop"):
            continue
        inputs = _entry_attrs([internals[row[nid] + index] for nid, index, *_ in node["inputs"]],
                              shapes, dtypes)
        if node["op"] != "_cond":
            _check_loop_body(node, inputs)
            continue
        if any(shape is None for shape, _ in inputs):
            continue
        outputs = [_branch_outputs(node, position, locs_attr, inputs)
                   for position, locs_attr, _ in _BRANCHES]
        where = node.get("attrs", {}).get(SOURCE_ATTR, node["name"])
        for i, (then_out, else_out) in enumerate(zip(*outputs)):
            if None in then_out[:1] + else_out[:1] or then_out[0] == else_out[0] and (
                    then_out[1] == else_out[1] or None in (then_out[1], else_out[1])):
                continue
            raise ControlFlowError(
                "cond at %s: output %d is %s in then_func but %s in else_func; both branches must "
                "return outputs of the same shape and dtype" % (where, i, _text(*then_out),
                                                                _text(*else_out)))


def _check_loop_body(node, inputs):
    """Check the conds inside a loop body, whose inputs are rows of the loop's data,
    the loop's states and values from outside."""
    attrs = {key: json.loads(value) for key, value in node["attrs"].items() if key.endswith("_locs")}
    if node["op"] == "_foreach":
        body = node["subgraphs"][0]
        num_data, num_states = len(attrs["in_data_locs"]), len(attrs["in_state_locs"])
        sources = {}
        for j, loc in enumerate(attrs["in_data_locs"]):
            shape, dtype = inputs[j]
            sources[loc] = (shape[1:] or (1,) if shape else None, dtype)
        for j, loc in enumerate(attrs["in_state_locs"]):
            sources[loc] = inputs[num_data + j]
        for j, loc in enumerate(attrs["remain_locs"]):
            sources[loc] = inputs[num_data + num_states + j]
    else:
        body = node["subgraphs"][1]
        sources = {k: inputs[loc] for k, loc in enumerate(attrs["func_input_locs"])}
    names = load_symbol(body).list_inputs()
    shapes = {names[k]: shape for k, (shape, _) in sources.items() if shape is not None}
    dtypes = {names[k]: dtype for k, (_, dtype) in sources.items() if dtype is not None}
    _check_graph(body, shapes, dtypes)


def _branch_outputs(node, position, locs_attr, inputs):
    branch = node["subgraphs"][position]
    names = load_symbol(branch).list_inputs()
    locs = json.loads(node["attrs"][locs_attr])
    shapes = {name: inputs[loc][0] for name, loc in zip(names, locs)}
    dtypes = {name: inputs[loc][1] for name, loc in zip(names, locs) if inputs[loc][1] is not None}
    _check_graph(branch, shapes, dtypes)
    return _entry_attrs(list(load_symbol(branch)), shapes, dtypes)


def _text(shape, dtype):
    return "shape %s %s" % (shape, np.dtype(dtype).name if dtype is not None else "")
