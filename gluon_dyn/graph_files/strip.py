"""Exported graphs without gluon_dyn's training-only nodes.

`gluon_dyn_grad_tie` nodes exist only to make MXNet request gradients during
training (see ops/while_loop.py); they compute the identity. Export removes them,
inside nested control-flow subgraphs too, so an exported model needs neither
gluon_dyn nor its C++ library; gluon_dyn's own node attributes (source lines)
are dropped as well.

A `_cond` branch that reads nothing but its zero-gradient anchors (a constant
branch: `n = 1`, a `break` flag) would read nothing once they are gone, and
MXNet's `_cond` cannot run a branch without inputs ("There are no inputs in
computation graph that require gradients"). Such a node keeps one of its inputs
in both branches, through one more output that nobody reads: the input's
`shape_array`, a few integers, the same in both branches whatever the input's
type and values (NaN included).
"""
import json

import mxnet as mx

from ..graph_json import load_symbol
from ..native import TRAINING_ONLY_OPS

_OWN_ATTR = "__gluon_dyn"


def strip_training_ops(graph):
    """Return a copy of a graph (a JSON dict) without training-only identity nodes.

    Each consumer of such a node's output i is rewired to the node's input i.
    """
    nodes = graph["nodes"]
    removed = {nid for nid, node in enumerate(nodes) if node["op"] in TRAINING_ONLY_OPS}

    def resolve(entry):
        nid, index = entry[0], entry[1]
        while nid in removed:
            nid, index = nodes[nid]["inputs"][index][0], nodes[nid]["inputs"][index][1]
        return [nid, index] + list(entry[2:])

    new_id, kept = {}, []
    for nid, node in enumerate(nodes):
        if nid not in removed:
            new_id[nid] = len(kept)
            kept.append(nid)

    def renumber(entry):
        entry = resolve(entry)
        return [new_id[entry[0]]] + entry[1:]

    new_nodes, added_outputs = [], {}
    for nid in kept:
        node = dict(nodes[nid])
        node["inputs"] = [renumber(e) for e in node["inputs"]]
        if "attrs" in node:
            # gluon_dyn's own annotations (e.g. the source line of a cond) stay home.
            node["attrs"] = {k: v for k, v in node["attrs"].items() if not k.startswith(_OWN_ATTR)}
        if "subgraphs" in node:
            added_outputs[nid] = _strip_subgraphs(node)
        new_nodes.append(node)
    result = dict(graph)
    result["nodes"] = new_nodes
    result["arg_nodes"] = [new_id[n] for n in graph["arg_nodes"] if n in new_id]
    result["heads"] = [renumber(e) for e in graph["heads"]]
    if "node_row_ptr" in graph:
        row_ptr = [0]
        for nid in kept:
            row_ptr.append(row_ptr[-1] + _num_outputs(graph, nid) + added_outputs.get(nid, 0))
        result["node_row_ptr"] = row_ptr
    return result


# Which attribute maps a subgraph's inputs to the node's inputs, per subgraph index.
_INPUT_LOCS = {"_cond": {1: "then_input_locs", 2: "else_input_locs"}}


def _strip_subgraphs(node):
    """Strip each subgraph; where that drops inputs (a `_cond` branch's zero-gradient
    anchors), drop them from the node's input locations too, keeping every branch
    runnable. Returns how many outputs the node gained (see the module's doc)."""
    locs_attrs = _INPUT_LOCS.get(node["op"], {})
    stripped, inputs, emptied = [], {}, []
    for index, sub in enumerate(node["subgraphs"]):
        new_sub = strip_training_ops(sub)
        if index in locs_attrs:
            before, after = _input_names(sub), _input_names(new_sub)
            locs = json.loads(node["attrs"][locs_attrs[index]])
            inputs[index] = {name: locs[before.index(name)] for name in after}
            if not after and locs:
                emptied.append(locs[0])   # an input the branch read before
        stripped.append(new_sub)
    node["subgraphs"] = stripped
    if emptied:
        for index, names in inputs.items():
            _read_input(node, index, names, emptied[0])
        node["attrs"] = dict(node["attrs"], num_outputs=str(int(node["attrs"]["num_outputs"]) + 1))
    for index, names in inputs.items():
        locs = [names[name] for name in _input_names(node["subgraphs"][index])]
        node["attrs"] = dict(node["attrs"], **{locs_attrs[index]: str(locs)})
    return 1 if emptied else 0


def _read_input(node, index, names, loc):
    """Give subgraph `index` of `node` one more output, the shape of the node's input
    `loc` (through the subgraph's variable for it, made if it has none); `names`
    (subgraph input name -> node input index) learns a made variable."""
    sub = node["subgraphs"][index]
    nodes = sub["nodes"]
    name = next((n for n, at in names.items() if at == loc), None)
    if name is None:
        name = "%s_input%d" % (node["name"], loc)
        names[name] = loc
        sub["arg_nodes"].append(len(nodes))
        nodes.append({"op": "null", "name": name, "inputs": []})
    variable = next(i for i, n in enumerate(nodes) if n["op"] == "null" and n["name"] == name)
    nodes.append({"op": "shape_array", "name": "%s_keeps_%s" % (node["name"], name),
                  "inputs": [[variable, 0, 0]]})
    sub["heads"].append([len(nodes) - 1, 0, 0])
    if "node_row_ptr" in sub:
        sub["node_row_ptr"] = _row_ptr(sub)


def _input_names(graph):
    return load_symbol(graph).list_inputs()


def _row_ptr(graph):
    """node_row_ptr of a graph given nodes of one output each at its end."""
    row_ptr = list(graph["node_row_ptr"])
    while len(row_ptr) <= len(graph["nodes"]):
        row_ptr.append(row_ptr[-1] + 1)
    return row_ptr


def _num_outputs(graph, nid):
    return graph["node_row_ptr"][nid + 1] - graph["node_row_ptr"][nid]


def strip_symbol_file(path):
    """Rewrite an exported symbol file without training-only nodes."""
    save_symbol(mx.sym.load(path), path)


def save_symbol(symbol, path, remove_amp_cast=True):
    """Write `symbol` to `path` in MXNet's JSON format, without training-only nodes."""
    save_graph(stripped_graph(symbol), path, remove_amp_cast)


def stripped_graph(symbol):
    """`symbol` as a JSON dict, without training-only nodes."""
    return strip_training_ops(json.loads(symbol.tojson()))


def save_graph(graph, path, remove_amp_cast=True):
    """Write a JSON dict graph to `path` as MXNet's Symbol.save does."""
    load_symbol(graph).save(path, remove_amp_cast=remove_amp_cast)
