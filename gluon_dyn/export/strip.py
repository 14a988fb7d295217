"""Exported graphs without gluon_dyn's training-only nodes.

`gluon_dyn_grad_tie` nodes exist only to make MXNet request gradients during
training (see ops/while_loop.py); they compute the identity. Export removes them,
inside nested control-flow subgraphs too, so an exported model needs neither
gluon_dyn nor its C++ library; gluon_dyn's own node attributes (source lines)
are dropped as well.
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

    new_nodes = []
    for nid in kept:
        node = dict(nodes[nid])
        node["inputs"] = [renumber(e) for e in node["inputs"]]
        if "attrs" in node:
            # gluon_dyn's own annotations (e.g. the source line of a cond) stay home.
            node["attrs"] = {k: v for k, v in node["attrs"].items() if not k.startswith(_OWN_ATTR)}
        if "subgraphs" in node:
            _strip_subgraphs(node)
        new_nodes.append(node)
    result = dict(graph)
    result["nodes"] = new_nodes
    result["arg_nodes"] = [new_id[n] for n in graph["arg_nodes"] if n in new_id]
    result["heads"] = [renumber(e) for e in graph["heads"]]
    if "node_row_ptr" in graph:
        row_ptr = [0]
        for nid in kept:
            row_ptr.append(row_ptr[-1] + _num_outputs(graph, nid))
        result["node_row_ptr"] = row_ptr
    return result


# Which attribute maps a subgraph's inputs to the node's inputs, per subgraph index.
_INPUT_LOCS = {"_cond": {1: "then_input_locs", 2: "else_input_locs"}}


def _strip_subgraphs(node):
    """Strip each subgraph; where that drops inputs (a `_cond` branch's zero-gradient
    anchors), drop them from the node's input locations too."""
    locs_attrs = _INPUT_LOCS.get(node["op"], {})
    stripped = []
    for index, sub in enumerate(node["subgraphs"]):
        new_sub = strip_training_ops(sub)
        if index in locs_attrs:
            before, after = _input_names(sub), _input_names(new_sub)
            locs = json.loads(node["attrs"][locs_attrs[index]])
            kept = [locs[before.index(name)] for name in after]
            node["attrs"] = dict(node["attrs"], **{locs_attrs[index]: str(kept)})
        stripped.append(new_sub)
    node["subgraphs"] = stripped


def _input_names(graph):
    return load_symbol(graph).list_inputs()


def _num_outputs(graph, nid):
    return graph["node_row_ptr"][nid + 1] - graph["node_row_ptr"][nid]


def strip_symbol_file(path):
    """Rewrite an exported symbol file without training-only nodes."""
    save_symbol(mx.sym.load(path), path)


def save_symbol(symbol, path, remove_amp_cast=True):
    """Write `symbol` to `path` in MXNet's JSON format, without training-only nodes."""
    load_symbol(strip_training_ops(json.loads(symbol.tojson()))).save(
        path, remove_amp_cast=remove_amp_cast)
