"""Projections of an array's rows, one per row, made one projection of the array.

A Python loop over a sequence's steps (`for t in range(seq.shape[0]): self.cell(seq[t], h)`)
unrolls into one `FullyConnected` per step on `seq[t]` (slice_axis, then Reshape),
every one with the same weight: 50 steps are 50 small products forward and, in a
recorded run, 50 weight gradients summed backward. Only the recurrent product
depends on the previous step; the input projection does not, so the graph
computes it once for every row and splits the result:

    rows = FullyConnected(Reshape(seq, (-3, -2)), W, b)        # (T*B, hidden)
    step = SliceChannel(Reshape(rows, (T, B, hidden)), T, axis=0, squeeze_axis=True)

and each step's product reads `step[t]`. Same values (each row's product is the
same dot products), the weight's gradient one product instead of T, the input's
gradient one concatenation. A row embedded before its product (a language model's
`self.cell(self.embed(tokens[t]), h)`: tokens (T, B)) gets the embedding made one
too, `Embedding(tokens)` before the product: one embedding gradient instead of T
dense ones. Done for graphs traced for exact shapes, where the sequence's shape is
known ((T, B, features), or (T, B) tokens), when at least half of its rows are
projected; a rewrite that would reorder the graph's inputs is not made.
"""
import json

from ... import graph_json

_SQUEEZE_FIRST = "(-3, -2)"     # Reshape of a one-row slice (1, B, F) -> (B, F)
_FLATTENED = ("True", "true", "1")


def batched(symbol, input_shapes):
    """`symbol` with the row projections of each array made one; `input_shapes`
    (graph input name -> shape) gives the arrays' shapes. `symbol` itself when it
    has none."""
    graph = json.loads(symbol.tojson())
    nodes = graph["nodes"]
    groups = _row_projections(nodes)
    if not groups:
        return symbol
    shapes = graph_json.output_shapes(symbol, input_shapes)
    placed, rewired = {}, {}
    for (rows_entry, embedding, parameters, attrs), by_row in groups.items():
        shape = graph_json.shape_of(rows_entry, shapes)
        if shape is None or len(shape) != (2 if embedding else 3) or 0 in shape \
                or 2 * len(by_row) < shape[0] or max(by_row) >= shape[0]:
            continue
        steps, batch = shape[0], shape[1]
        first = nodes[min(min(fcs) for fcs in by_row.values())]
        hidden = int(json.loads(attrs)["num_hidden"])
        new_nodes, rows = [], list(rows_entry) + [0]
        if embedding:
            weight, embed_attrs = embedding
            new_nodes.append(graph_json.node("Embedding", first["name"] + "_all_rows_embedded",
                                             [rows, list(weight) + [0]], **json.loads(embed_attrs)))
            rows = [new_nodes[-1], 0, 0]
        new_nodes.append(graph_json.node("Reshape", first["name"] + "_all_rows_in", [rows],
                                         shape=_SQUEEZE_FIRST))
        new_nodes.append(dict(first, name=first["name"] + "_all_rows",
                              inputs=[[new_nodes[-1], 0, 0]] + [list(p) + [0] for p in parameters]))
        new_nodes.append(graph_json.node("Reshape", first["name"] + "_by_step",
                                         [[new_nodes[-1], 0, 0]],
                                         shape="(%d, %d, %d)" % (steps, batch, hidden)))
        split = graph_json.node("SliceChannel", first["name"] + "_steps", [[new_nodes[-1], 0, 0]],
                                num_outputs=str(steps), axis="0", squeeze_axis="True")
        # after the last node the new ones read
        after = max([rows_entry[0]] + [p[0] for p in parameters] +
                    ([embedding[0][0]] if embedding else []))
        placed.setdefault(after, []).extend(new_nodes + [split])
        for row, fcs in by_row.items():
            for fc in fcs:
                rewired[(fc, 0)] = [split, row, 0]
    if not rewired:
        return symbol
    graph_json.rewire(graph, rewired)
    rewritten = graph_json.load_symbol(graph_json.with_nodes_after(graph, placed))
    if rewritten.list_inputs() != symbol.list_inputs():
        return symbol
    return rewritten


def _row_projections(nodes):
    """{(rows entry, embedding, parameter entries, attrs): {row: [FullyConnected
    indices]}} for FullyConnected nodes reading one row of an array (slice_axis on
    axis 0 of one index, squeezed by Reshape (-3, -2)), or its embedding
    (embedding: (weight entry, attrs) of the Embedding between them, else None)."""
    groups = {}
    for index, node in enumerate(nodes):
        attrs = node.get("attrs", {})
        if node["op"] != "FullyConnected" or attrs.get("flatten", "True") not in _FLATTENED:
            continue
        squeeze, embedding = nodes[node["inputs"][0][0]], None
        if squeeze["op"] == "Embedding" and node["inputs"][0][1] == 0:
            embedding = (tuple(squeeze["inputs"][1][:2]),
                         json.dumps(squeeze.get("attrs", {}), sort_keys=True))
            squeeze = nodes[squeeze["inputs"][0][0]]
        if squeeze["op"] != "Reshape" or squeeze.get("attrs", {}).get("shape") != _SQUEEZE_FIRST:
            continue
        row = nodes[squeeze["inputs"][0][0]]
        row_attrs = row.get("attrs", {})
        if row["op"] != "slice_axis" or row_attrs.get("axis") != "0":
            continue
        try:
            begin, end = int(row_attrs["begin"]), int(row_attrs["end"])
        except (KeyError, ValueError):   # end "None", or absent
            continue
        if begin < 0 or end != begin + 1:
            continue
        key = (tuple(row["inputs"][0][:2]), embedding,
               tuple(tuple(e[:2]) for e in node["inputs"][1:]), json.dumps(attrs, sort_keys=True))
        groups.setdefault(key, {}).setdefault(begin, []).append(index)
    return {key: rows for key, rows in groups.items()
            if sum(len(fcs) for fcs in rows.values()) > 1}
