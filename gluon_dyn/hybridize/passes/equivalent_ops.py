"""Operators rewritten to equivalents MXNet 1.9.1 runs faster on the CPU.

- `tanh` and `sigmoid` compute element by element with the C library (tanhf, expf):
  about 15 ns an element, where `Activation` with the same act_type runs oneDNN's
  vectorised kernel, 10x faster on a (32, 512) array forward and backward. Results
  differ by at most one unit in the last place. Gluon's RNN, GRU and LSTM cells
  use `tanh` and `sigmoid` for their gates. Where a value computed from one reaches
  an operator that decides on values (a comparison, argmax, a sort, non-maximum
  suppression, a branch, a clip: graph_json.decides), it is computed as written: one unit
  in the last place there can change the result entirely (YOLO's detections of
  equal score, kept in another order).
- `SliceChannel` (split) copies element by element: 0.4 ms for a (32, 2048) LSTM
  gate split, forward, and as much again backward. gluon_dyn's `gluon_dyn_split`
  (src/operator/control_flow/split_op.cc) copies each part one contiguous run at
  a time.
- `_rnn_param_concat` (the concatenated weights of MXNet's RNN operator, built on
  every call: fused_cells.py) copies element by element too: 5 ms for an LSTM's 8 MB
  at hidden 512, and as much backward, where gluon_dyn's `gluon_dyn_concat`
  (src/operator/control_flow/concat_op.cc) copies each input with one memcpy.
- `Dropout` while it drops (a recorded run in training mode) calls the Mersenne
  twister out of line for every element and keeps a bit mask written a bit at a
  time: about 6 ns an element, 0.2 ms of a (128, 256) array, where gluon_dyn's
  `gluon_dyn_dropout` (src/operator/control_flow/dropout_op.cc) draws the same
  numbers from the same random states in a third of the time, with the same results,
  gradients and states after it, bit for bit. That holds for MXNet's own kernel
  (not the MKL one of builds with MKL's BLAS) with one copy of the CPU's parallel
  random states (MXNET_CPU_PARALLEL_RAND_COPY), for p written in plain decimals.
- A split along the first axis whose every part is split alike (a GRU's input
  products over all steps, split by step, each step split into gates) is 1 + T
  splits forward and as many backward: the same parts come from splitting the
  whole along the later axis once, then each of those along the first axis,
  1 + gates splits.
- A stack of every part of a split, in order and along the split's axis, is the
  split's input; a stack of rows 0..n-1 of an array (`x[t]` for each t: a
  slice_axis of one row, its axis merged away) is one slice of n rows, or the
  array when it has n rows (known for graphs traced for exact shapes). A loop
  whose steps became MXNet's RNN operator (fused_cells.py) reads its input rows
  and stacks its outputs so: at hidden 512 and batch 32 the copies and their
  2T + 1 operators cost about 4 ms of a 60 ms call.

The rewrite keeps node names, graph inputs and outputs, and applies to float32
nodes (oneDNN's kernels; the split is measured on float32 only).
"""
import json
import os
import re

import mxnet as mx

from ... import graph_json
from ...native import CONCAT_OP, DROPOUT_OP, SPLIT_OP

ACTIVATIONS = {"tanh": "tanh", "sigmoid": "sigmoid"}
_TRUE = ("True", "true", "1")
_PLAIN_DECIMAL = re.compile(r"[0-9]+\.?[0-9]*|\.[0-9]+")


def _draws_as_mxnet():
    """Whether gluon_dyn_dropout draws as this MXNet's Dropout (above)."""
    features = mx.runtime.Features()
    return not features.is_enabled("BLAS_MKL") and \
        os.environ.get("MXNET_CPU_PARALLEL_RAND_COPY", "1") == "1"


_DRAWS_AS_MXNET = _draws_as_mxnet()


def rewritten(symbol, input_dtypes, input_shapes=None, dropping=False):
    """`symbol` with the operators above replaced; `input_dtypes` (graph input name
    -> numpy dtype) tells which nodes compute in float32, `input_shapes` (name ->
    shape, for a graph serving those only) how many rows stacked rows have;
    `dropping`: whether its runs are recorded in training mode (its Dropouts drop).
    `symbol` itself when nothing is replaced."""
    graph = json.loads(symbol.tojson())
    nodes = graph["nodes"]
    float32 = _float32_outputs(symbol, input_dtypes)
    deciding = graph_json.deciding_inputs(graph)
    replaced = False
    for index, node in enumerate(nodes):
        if not node["inputs"] or (node["inputs"][0][0], node["inputs"][0][1]) not in float32:
            continue
        if node["op"] in ACTIVATIONS and index not in deciding:
            nodes[index] = dict(node, op="Activation",
                                attrs=dict(node.get("attrs", {}),
                                           act_type=ACTIVATIONS[node["op"]]))
            replaced = True
        elif node["op"] == "SliceChannel" and _split(node):
            nodes[index] = dict(node, op=SPLIT_OP, attrs=_split(node))
            replaced = True
        elif node["op"] == "_rnn_param_concat" and _concat(node):
            nodes[index] = dict(node, op=CONCAT_OP, attrs=_concat(node))
            replaced = True
        elif node["op"] == "Dropout" and dropping and _dropout(node):
            nodes[index] = dict(node, op=DROPOUT_OP, attrs=_dropout(node))
            replaced = True
    placed, rewired = _splits_of_splits(graph)
    _stacks_of_parts(graph, placed, rewired,
                     graph_json.output_shapes(symbol, input_shapes) if input_shapes else {})
    if not (replaced or rewired):
        return symbol
    graph_json.rewire(graph, rewired)
    return graph_json.load_symbol(graph_json.with_nodes_after(graph, placed))


def _splits_of_splits(graph):
    """({split index: the nodes replacing it}, {(inner split, part): entry}) for
    gluon_dyn_splits along the first axis (squeezed) each of whose parts is read by
    one gluon_dyn_split alone, all of the same attributes."""
    nodes, readers = graph["nodes"], graph_json.readers(graph)
    placed, rewired = {}, {}
    for index, node in enumerate(nodes):
        attrs = node.get("attrs", {})
        if node["op"] != SPLIT_OP or attrs["axis"] != "0" or attrs["squeeze_axis"] != "1":
            continue
        steps = int(attrs["num_outputs"])
        inner = [[reader for reader, _ in readers.get((index, step), [])]
                 for step in range(steps)]
        if any(len(each) != 1 or each[0] == "head" or nodes[each[0]]["op"] != SPLIT_OP
               for each in inner):
            continue
        inner = [each[0] for each in inner]
        if len({json.dumps(nodes[i]["attrs"], sort_keys=True) for i in inner}) != 1:
            continue
        split = nodes[inner[0]]["attrs"]
        parts = int(split["num_outputs"])
        by_part = graph_json.node(SPLIT_OP, node["name"] + "_by_part", [node["inputs"][0]],
                                  axis=str(int(split["axis"]) + 1),
                                  num_outputs=split["num_outputs"],
                                  squeeze_axis=split["squeeze_axis"])
        by_step = [graph_json.node(SPLIT_OP, node["name"] + "_part%d_by_step" % part,
                                   [[by_part, part, 0]], axis="0", num_outputs=str(steps),
                                   squeeze_axis="1") for part in range(parts)]
        placed[index] = [by_part] + by_step
        for step, split_index in enumerate(inner):
            for part in range(parts):
                rewired[(split_index, part)] = [by_step[part], step, 0]
    return placed, rewired


def _stacks_of_parts(graph, placed, rewired, shapes):
    """Adds to `placed` and `rewired` (as _splits_of_splits gives them) the
    replacements of stacks of a split's parts and of an array's first rows;
    `shapes` (graph_json.output_shapes, or empty) tells an array's rows."""
    nodes = graph["nodes"]
    heads = {(entry[0], entry[1]) for entry in graph["heads"]}
    for index, node in enumerate(nodes):
        if node["op"] != "stack" or any((entry[0], entry[1]) in rewired
                                        for entry in node["inputs"]):
            continue
        axis, inputs = node.get("attrs", {}).get("axis", "0"), node["inputs"]
        # A graph input cannot be a graph output of MXNet's too.
        def may_stand_for_it(entry):
            return nodes[entry[0]]["op"] != "null" or (index, 0) not in heads
        whole = _split_input(nodes, inputs, axis)
        if whole is not None and may_stand_for_it(whole):
            rewired[(index, 0)] = whole
            continue
        rows = _rows_of(nodes, inputs) if axis == "0" else None
        if rows is None:
            continue
        shape = graph_json.shape_of(rows, shapes)
        if shape and shape[0] == len(inputs) and may_stand_for_it(rows):
            rewired[(index, 0)] = rows
            continue
        first_rows = graph_json.node("slice_axis", node["name"] + "_rows", [rows],
                                     axis="0", begin="0", end=str(len(inputs)))
        placed.setdefault(index, []).append(first_rows)
        rewired[(index, 0)] = [first_rows, 0, 0]


def _split_input(nodes, entries, axis):
    """The entry `entries` are every part of, in order, of a squeezed split along
    `axis`; or None."""
    split = nodes[entries[0][0]]
    attrs = split.get("attrs", {})
    if split["op"] != SPLIT_OP or attrs["axis"] != axis or attrs["squeeze_axis"] != "1" or \
            int(attrs["num_outputs"]) != len(entries) or \
            [entry[:2] for entry in entries] != [[entries[0][0], k] for k in range(len(entries))]:
        return None
    return split["inputs"][0]


def _rows_of(nodes, entries):
    """The entry whose rows 0..len(entries)-1 `entries` are, in order, each a
    slice_axis of one row along the first axis reshaped (-3, -2); or None."""
    sources = []
    for row, entry in enumerate(entries):
        reshape = nodes[entry[0]]
        if reshape["op"] != "Reshape" or reshape.get("attrs", {}).get("shape") != "(-3, -2)":
            return None
        sliced = nodes[reshape["inputs"][0][0]]
        attrs = sliced.get("attrs", {})
        if sliced["op"] != "slice_axis" or attrs.get("axis") != "0" or \
                attrs.get("begin") != str(row) or attrs.get("end") != str(row + 1):
            return None
        sources.append(sliced["inputs"][0])
    return sources[0] if all(source == sources[0] for source in sources) else None


def _split(node):
    """gluon_dyn_split's attributes for a SliceChannel node, or None (a negative axis)."""
    attrs = node.get("attrs", {})
    try:
        axis = int(attrs.get("axis", "1"))
    except ValueError:
        return None
    if axis < 0:
        return None
    return {"axis": str(axis), "num_outputs": attrs["num_outputs"],
            "squeeze_axis": "1" if attrs.get("squeeze_axis", "False") in _TRUE else "0"}


def _concat(node):
    """gluon_dyn_concat's attributes for a _rnn_param_concat node, or None (a negative
    dim)."""
    attrs = node.get("attrs", {})
    dim = attrs.get("dim", "1")
    if not dim.isdigit():
        return None
    return {"dim": dim, "num_args": attrs["num_args"]}


def _dropout(node):
    """gluon_dyn_dropout's attributes for a Dropout node, or None (along axes, or a
    p not in (0, 1) or not in plain decimals)."""
    attrs = node.get("attrs", {})
    p = attrs.get("p", "0.5")
    if not _DRAWS_AS_MXNET or attrs.get("axes", "()") not in ("()", "[]") or \
            not _PLAIN_DECIMAL.fullmatch(p) or not 0 < float(p) < 1:
        return None
    return {"p": p}


def _float32_outputs(symbol, input_dtypes):
    """{(node index, output)} of `symbol`'s node outputs MXNet infers as float32."""
    internals = symbol.get_internals()
    _, types, _ = internals.infer_type_partial(**input_dtypes)
    graph = json.loads(symbol.tojson())
    names = {}
    for index, node in enumerate(graph["nodes"]):
        if node["op"] == "null":
            names[node["name"]] = (index, 0)
        else:
            outputs = graph["node_row_ptr"][index + 1] - graph["node_row_ptr"][index]
            for output in range(outputs):
                names["%s_output%d" % (node["name"], output)] = (index, output)
            names.setdefault("%s_output" % node["name"], (index, 0))
    return {names[name] for name, dtype in zip(internals.list_outputs(), types)
            if name in names and dtype is not None and dtype.__name__ == "float32"}
