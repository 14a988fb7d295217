"""A body whose recursive calls receive arrays it computed, split into two stages
(passes.py): the down stage computes those arrays, before the callees run; the
up stage computes the body's results, after them.

The down stage's outputs are the arrays passed down, then the values of its
work the up stage also reads (each computed once, handed on: recomputing a
random operator such as Dropout would draw other numbers). The up stage reads
each of those as an input variable.
"""
import json

import mxnet as mx

from ... import graph_json


def split(outputs, passes, prefix):
    """(up symbol, down symbol, handoffs) of a body returning `outputs` whose calls
    receive `passes` (Symbols, in order: down outputs 0, 1, ...). The up symbol
    reads a down output as a variable named `prefix` + "_handoff<k>"; `handoffs`
    maps each such name to k."""
    passes = [mx.sym.identity(p) if p.get_children() is None else p for p in passes]
    graph = json.loads(mx.sym.Group(list(outputs) + passes).tojson())
    nodes, heads = graph["nodes"], graph["heads"]
    down = _ancestors(nodes, heads[len(outputs):])
    # The values of the down stage the up stage reads (by position: names repeat).
    handed, seen = [], set()
    pending = [tuple(entry[:2]) for entry in heads[:len(outputs)]]
    while pending:
        entry = pending.pop()
        if entry in seen:
            continue
        seen.add(entry)
        if entry[0] in down:
            handed.append(entry)
        else:
            pending.extend(tuple(e[:2]) for e in nodes[entry[0]]["inputs"])
    pass_entries = [tuple(entry[:2]) for entry in heads[len(outputs):]]
    down_heads = pass_entries + sorted(set(handed) - set(pass_entries))
    position = {entry: index for index, entry in enumerate(down_heads)}
    down_symbol = graph_json.load_symbol({
        "nodes": nodes, "heads": [[i, o, 0] for i, o in down_heads],
        "arg_nodes": [i for i, node in enumerate(nodes) if node["op"] == "null"]})
    # The up graph: a variable per handed value, first (inputs precede readers),
    # read instead of it outside the down stage.
    names = {entry: "%s_handoff%d" % (prefix, position[entry]) for entry in handed}
    variables = {entry: [k, 0, 0] for k, entry in enumerate(handed)}
    shift = len(handed)

    def reference(entry, rewired):
        key = (entry[0], entry[1])
        if rewired and key in variables:
            return variables[key]
        return [entry[0] + shift, entry[1], 0]

    up_nodes = [{"op": "null", "name": names[entry], "inputs": []} for entry in handed]
    up_nodes += [dict(node, inputs=[reference(e, index not in down) for e in node["inputs"]])
                 for index, node in enumerate(nodes)]
    up = graph_json.load_symbol({
        "nodes": up_nodes, "heads": [reference(e, True) for e in heads[:len(outputs)]],
        "arg_nodes": [i for i, node in enumerate(up_nodes) if node["op"] == "null"]})
    return up, down_symbol, {names[entry]: position[entry] for entry in handed}


def _ancestors(nodes, heads):
    """The operator nodes (indices) that the `heads` entries are computed by."""
    found, pending = set(), [entry[0] for entry in heads]
    while pending:
        index = pending.pop()
        if index in found or nodes[index]["op"] == "null":
            continue
        found.add(index)
        pending.extend(entry[0] for entry in nodes[index]["inputs"])
    return found
