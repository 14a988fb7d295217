"""Shapes of a graph's inputs, inferred through its `_cond` and `_while_loop` nodes.

MXNet 1.9.1 has no shape inference for those two nodes: a parameter read only
inside a loop body or a branch (an RNN's weights) gets no shape from it, nor
does anything after the node. Here each such node's subgraphs are inferred from
the shapes of the values the node passes them, which gives the shapes of the
outer values they read and of the node's outputs (a loop's final variables have
their initial shapes, its per-step outputs max_iterations rows of the body's; a
cond's outputs are its branches'); inference then goes on past the node, until
nothing more is learnt.

gluon_dyn's training-only nodes are left out first (graph_files/strip.py): MXNet's
shape inference for an extension operator must not see an input of unknown
rank (native.LIBRARY_OPS), which would be most of them here.
"""
import json

import mxnet as mx

from ..graph_files.strip import strip_training_ops
from ..graph_json import load_symbol

_LOOP, _BRANCH = "_while_loop", "_cond"
# Each subgraph of a node, with the attribute mapping its inputs to the node's.
_SUBGRAPH_LOCS = {_LOOP: ("cond_input_locs", "func_input_locs"),
                  _BRANCH: ("cond_input_locs", "then_input_locs", "else_input_locs")}
# Operators whose output has their (first) input's shape: a shape learnt for the
# output is the input's too.
_SAME_SHAPE_OPS = ("identity", "_copy", "BlockGrad", "Cast")
# The name of the variable standing for output o of node i during inference.
_OUTPUT_VARIABLE = "__gluon_dyn_output_%d_%d"


def infer_input_shapes(symbol, shapes):
    """{name: shape} of `symbol`'s inputs (arguments and auxiliary states) given the
    shapes of some of them (`shapes`, by name); None or absent where it cannot be
    inferred."""
    return _infer(strip_training_ops(json.loads(symbol.tojson())), shapes)[0]


def _infer(graph, given):
    """(input shapes by name, head shapes) of a JSON graph, given input shapes by name."""
    nodes = graph["nodes"]
    inputs = dict(given)
    outputs = {}   # (node index, output) of a _cond/_while_loop node -> its shape
    while True:
        input_shapes, entry_shapes = _infer_around(graph, inputs, outputs)
        learnt = False
        for index, node in enumerate(nodes):
            if node["op"] not in _SUBGRAPH_LOCS:
                continue
            node_inputs = [entry_shapes[(i, o)] for i, o, _ in node["inputs"]]
            found_inputs, found_outputs = _through_node(node, node_inputs)
            for position, shape in found_inputs.items():
                name = _variable_behind(nodes, node["inputs"][position])
                if shape is not None and name is not None and input_shapes.get(name) is None \
                        and inputs.get(name) is None:
                    inputs[name] = shape
                    learnt = True
            for output, shape in found_outputs.items():
                if shape is not None and outputs.get((index, output)) is None:
                    outputs[(index, output)] = shape
                    learnt = True
        if not learnt:
            # An input only unknown values read is out of MXNet's sight: its shape is
            # what was given or learnt.
            for name, shape in inputs.items():
                if input_shapes.get(name) is None:
                    input_shapes[name] = shape
            return input_shapes, [entry_shapes[(i, o)] for i, o, _ in graph["heads"]]


def _infer_around(graph, inputs, outputs):
    """MXNet's inference on what of `graph` it can know: the outputs of its
    _cond/_while_loop nodes become inputs of the shapes in `outputs`, and what reads
    one of unknown shape is left out (some shape functions fail on an input of
    unknown rank rather than give up). Returns the shapes (None: unknown) of the
    graph's inputs by name and of the values its heads and those nodes read, by
    (node, output)."""
    nodes = graph["nodes"]
    read = [tuple(entry[:2]) for entry in graph["heads"]] + [
        (i, o) for node in nodes if node["op"] in _SUBGRAPH_LOCS for i, o, _ in node["inputs"]]
    unknown = set()   # node outputs computed from a control-flow output of unknown shape

    def is_unknown(entry):
        if nodes[entry[0]]["op"] in _SUBGRAPH_LOCS:
            return outputs.get((entry[0], entry[1])) is None
        return entry[0] in unknown

    for index, node in enumerate(nodes):
        if node["op"] not in _SUBGRAPH_LOCS and any(is_unknown(e) for e in node["inputs"]):
            unknown.add(index)
    readable = [entry for entry in read if not is_unknown(entry)]
    if not readable:
        return {}, {entry: None for entry in read}
    # Each control-flow output read becomes a variable, placed first (a node's
    # inputs come before it).
    made = {}
    for node in nodes:
        for i, o, _ in node["inputs"]:
            if nodes[i]["op"] in _SUBGRAPH_LOCS and outputs.get((i, o)) is not None:
                made.setdefault((i, o), len(made))
    for entry in readable:
        if nodes[entry[0]]["op"] in _SUBGRAPH_LOCS:
            made.setdefault(entry, len(made))

    def moved(entry):
        key = (entry[0], entry[1])
        return [made[key], 0, 0] if key in made else [len(made) + entry[0], entry[1], 0]

    variables = [{"op": "null", "name": _OUTPUT_VARIABLE % key, "inputs": []} for key in made]
    symbol = load_symbol({
        "nodes": variables + [dict(node, inputs=[moved(e) for e in node["inputs"]])
                              for node in nodes],
        "arg_nodes": list(range(len(made))) + [len(made) + i for i, node in enumerate(nodes)
                                               if node["op"] == "null"],
        "heads": [moved(entry) for entry in readable]})
    known = dict({name: shape for name, shape in inputs.items() if shape is not None},
                 **{_OUTPUT_VARIABLE % key: outputs[key] for key in made})
    names = symbol.list_arguments() + symbol.list_auxiliary_states()
    arg_shapes, head_shapes, aux_shapes = symbol.infer_shape_partial(
        **{name: shape for name, shape in known.items() if name in names})
    made_names = {_OUTPUT_VARIABLE % key for key in made}
    input_shapes = {name: _known(shape) for name, shape in zip(names, arg_shapes + aux_shapes)
                    if name not in made_names}
    shapes = {entry: None for entry in read}
    shapes.update(zip(readable, (_known(shape) for shape in head_shapes)))
    return input_shapes, shapes


def _through_node(node, input_shapes):
    """Shapes a _cond/_while_loop node's subgraphs give its inputs ({position: shape})
    and its outputs ({output: shape}), given its inputs' shapes (None: unknown)."""
    attrs = {key: json.loads(value) for key, value in node["attrs"].items()
             if key.endswith("_locs")}
    found_inputs, heads = {}, []
    for subgraph, locs_attr in zip(node["subgraphs"], _SUBGRAPH_LOCS[node["op"]]):
        locs = attrs[locs_attr]
        names = load_symbol(subgraph).list_inputs()
        given = {name: input_shapes[loc] for name, loc in zip(names, locs)
                 if input_shapes[loc] is not None}
        try:
            sub_inputs, sub_heads = _infer(subgraph, given)
        except mx.base.MXNetError:
            # Some shape functions fail on an input of unknown rank (reshape_like)
            # rather than give up: a later round may know more of the inputs.
            sub_inputs, sub_heads = {}, [None] * len(subgraph["heads"])
        found_inputs.update({loc: sub_inputs[name] for name, loc in zip(names, locs)
                             if input_shapes[loc] is None and sub_inputs.get(name) is not None})
        heads.append(sub_heads)
    if node["op"] == _BRANCH:
        then_heads, else_heads = heads[1], heads[2]
        return found_inputs, {k: then_heads[k] or else_heads[k] for k in range(len(then_heads))}
    # A loop: per-step outputs stack max_iterations of the body's, the loop
    # variables keep their shapes, which the body's new values also have.
    num_out = int(node["attrs"]["num_out_data"])
    rows = int(node["attrs"]["max_iterations"])
    func_locs, var_locs = attrs["func_input_locs"], attrs["func_var_locs"]
    body_heads = heads[1]
    found_outputs = {k: (rows,) + body_heads[k] if body_heads[k] else None for k in range(num_out)}
    for j, var_loc in enumerate(var_locs):
        loc = func_locs[var_loc]
        shape = input_shapes[loc] or found_inputs.get(loc) or body_heads[num_out + j]
        found_outputs[num_out + j] = shape
        if input_shapes[loc] is None:
            found_inputs[loc] = shape
    return found_inputs, found_outputs


def _variable_behind(nodes, entry):
    """The name of the variable `entry` copies (through _SAME_SHAPE_OPS), or None."""
    node = nodes[entry[0]]
    while node["op"] in _SAME_SHAPE_OPS:
        node = nodes[node["inputs"][0][0]]
    return node["name"] if node["op"] == "null" else None


def _known(shape):
    """A shape MXNet inferred, or None where it did not (() or a 0 dimension)."""
    return tuple(shape) if shape and 0 not in shape else None
