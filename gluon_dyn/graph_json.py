"""MXNet graphs as JSON dicts (the format of `Symbol.tojson()` and of exported models)."""
import json
import re

import mxnet as mx

# Subgraphs inside a control-flow node carry no version stamp; without one MXNet
# logs an "upgrade" message each time one is loaded.
_VERSION_STAMP = {"mxnet_version": ["int", 10901]}  # 1.9.1


def load_symbol(graph):
    """The Symbol of a graph given as a JSON dict, nested subgraphs included."""
    return mx.sym.load_json(json.dumps(dict(graph, attrs=_VERSION_STAMP)))


def with_unique_names(symbol):
    """`symbol` with every operator node named apart (in nested subgraphs too): a
    HybridBlock called twice in one trace names each call's operators alike (Gluon
    numbers them per name scope), and code that finds values by a node's name (a
    graph cut around a boolean_mask, cut_graph.py) would confuse them."""
    graph = json.loads(symbol.tojson())
    taken = set()
    renamed = []

    def visit(nodes):
        for each in nodes:
            if each["op"] != "null":
                name, number = each["name"], 1
                while name in taken:
                    name, number = "%s_%d" % (each["name"], number), number + 1
                if name != each["name"]:
                    renamed.append(each["name"])
                    each["name"] = name
                taken.add(name)
            for subgraph in each.get("subgraphs", ()):
                visit(subgraph["nodes"])
    visit(graph["nodes"])
    return load_symbol(graph) if renamed else symbol


def node(op, name, inputs, **attrs):
    """A JSON node dict; inputs are [node index or node dict, output, 0] entries."""
    return {"op": op, "name": name, "inputs": inputs, "attrs": attrs}


def output_shapes(symbol, input_shapes):
    """{(node index, output) in `symbol.tojson()`: shape} inferred from `input_shapes`
    (graph input name -> shape). Outputs MXNet cannot infer (after a `_cond` or
    `_while_loop`: () or a 0 dimension) are left out.

    Keyed by position, not by name: a layer called twice gives two nodes of one
    name and, possibly, two shapes. The symbol's internals list the visible outputs
    of its nodes in the order of its JSON nodes (a node's hidden outputs, such as
    Dropout's mask, are not listed)."""
    internals = symbol.get_internals()
    _, shapes, _ = internals.infer_shape_partial(**input_shapes)
    listed = list(zip(internals.list_outputs(), shapes))
    found, position = {}, 0
    for index, node in enumerate(json.loads(symbol.tojson())["nodes"]):
        single = node["name"] if node["op"] == "null" else "%s_output" % node["name"]
        output = 0
        while position < len(listed) and listed[position][0] in (
                single if output == 0 else None, "%s_output%d" % (node["name"], output)):
            shape = listed[position][1]
            if shape and 0 not in shape:
                found[(index, output)] = tuple(shape)
            output, position = output + 1, position + 1
            if listed[position - 1][0] == single:
                break
    return found


def shape_of(entry, shapes):
    """The shape `output_shapes` gave a node output (a JSON entry), or None."""
    return shapes.get((entry[0], entry[1]))


def readers(graph):
    """{(node index, output): [(reader, input position)]} of a JSON graph; a graph
    output is read by ("head", its position)."""
    found = {}
    for index, each in enumerate(graph["nodes"]):
        for position, entry in enumerate(each["inputs"]):
            found.setdefault((entry[0], entry[1]), []).append((index, position))
    for position, entry in enumerate(graph["heads"]):
        found.setdefault((entry[0], entry[1]), []).append(("head", position))
    return found


def rewire(graph, replacements):
    """Points every read of a node output in `replacements` ({(node index, output):
    new entry}) at its replacement, in `graph`'s nodes and heads."""
    def rewired(entries):
        return [replacements.get((entry[0], entry[1]), entry) if isinstance(entry[0], int)
                else entry for entry in entries]
    for each in graph["nodes"]:
        each["inputs"] = rewired(each["inputs"])
    graph["heads"] = rewired(graph["heads"])


def with_nodes_after(graph, placed):
    """`graph` (a JSON dict) with new nodes: `placed` maps a node's index to the
    node dicts placed right after it (MXNet loads nodes in order, inputs first).
    Inputs may refer to nodes by index or, as [node dict, output, 0], to a new one.
    Nodes nothing reads any more stay, unreachable from the heads."""
    order = []
    for index, node in enumerate(graph["nodes"]):
        order.append(node)
        order.extend(placed.get(index, ()))
    position = {id(node): index for index, node in enumerate(order)}

    def index_of(entry):
        node = entry[0] if isinstance(entry[0], dict) else graph["nodes"][entry[0]]
        return [position[id(node)], entry[1], 0]

    nodes = [dict(node, inputs=[index_of(entry) for entry in node["inputs"]]) for node in order]
    return {"nodes": nodes, "heads": [index_of(entry) for entry in graph["heads"]],
            "arg_nodes": [i for i, node in enumerate(nodes) if node["op"] == "null"]}


# Operators whose output shape depends on the input values (rows a mask keeps).
DATA_DEPENDENT_SHAPE_OPS = ("_contrib_boolean_mask", "_npi_boolean_mask", "_npi_nonzero",
                            "_npx_nonzero", "_npi_unique")
# MXNet 1.9.1 knows the output shapes of these nodes only once they ran: it has
# no shape inference for them (and its _while_loop shape pass corrupts memory
# when its inputs' shapes are partly unknown). A graph holding one runs with its
# shapes inferred as it goes (MXNet's dynamic-shape CachedOp), never static_shape.
UNINFERABLE_OPS = ("_cond", "_while_loop") + DATA_DEPENDENT_SHAPE_OPS


# Operators that decide on their inputs' values: comparisons, rounding, orderings
# and selections (argmax, sort, top-k, non-maximum suppression), casts to integers,
# masks, the control-flow nodes (whose predicates may read any input), and those
# whose gradient takes one path or another by comparing values (clip, max and min,
# pooling, maximum and minimum). A value differing in its last bit can change what
# they give entirely: YOLO's detections of equal score kept in another order, or
# CenterNet's heatmap gradient, cut by `clip` just inside or just outside 1 - 1e-4.
_DECIDING_OPS = {"argmax", "argmin", "argmax_channel", "topk", "sort", "argsort", "round",
                 "rint", "floor", "ceil", "trunc", "fix", "sign", "where", "one_hot", "clip",
                 "max", "min", "Pooling", "_contrib_box_nms",
                 "_contrib_box_non_maximum_suppression", "_contrib_bipartite_matching",
                 "_contrib_MultiBoxDetection"} | \
    set(DATA_DEPENDENT_SHAPE_OPS) | {"_cond", "_foreach", "_while_loop"}
_DECIDING_WORDS = ("greater", "lesser", "equal", "logical", "argmax", "argmin", "argsort",
                   "maximum", "minimum")
_INTEGER_TYPES = ("int8", "uint8", "int32", "int64", "bool")


def decides(node):
    """Whether a JSON node's output is a decision on its inputs' values (_DECIDING_OPS)."""
    op = node["op"]
    if op in ("Cast", "cast", "amp_cast", "_npi_cast") or op.endswith("astype"):
        return node.get("attrs", {}).get("dtype") in _INTEGER_TYPES
    name = op[len("_npi_"):] if op.startswith(("_npi_", "_npx_")) else op
    return op in _DECIDING_OPS or name in _DECIDING_OPS or any(
        word in name for word in _DECIDING_WORDS)


def deciding_inputs(graph):
    """Indices of the nodes of a JSON graph whose outputs reach, through any path, an
    operator that decides on their values (`decides`)."""
    found, pending = set(), [index for index, node in enumerate(graph["nodes"]) if decides(node)]
    while pending:
        for entry in graph["nodes"][pending.pop()]["inputs"]:
            if entry[0] not in found:
                found.add(entry[0])
                pending.append(entry[0])
    return found


def holds_ops(graph, ops, nested=True):
    """Whether `graph` (a Symbol or a JSON dict) has a node of one of `ops`, inside
    control-flow subgraphs too unless `nested` is False."""
    if isinstance(graph, mx.sym.Symbol) and not nested:
        return not _top_level_ops(graph).isdisjoint(ops)
    nodes = (json.loads(graph.tojson()) if isinstance(graph, mx.sym.Symbol) else graph)["nodes"]
    return any(node["op"] in ops or (nested and any(holds_ops(sub, ops)
                                                    for sub in node.get("subgraphs", ())))
               for node in nodes)


_OP_LINE = re.compile(r"^Op:([^,\n]+), Name=", re.M)


def _top_level_ops(symbol):
    """The operators of `symbol`'s nodes, not those inside subgraphs: MXNet's debug
    string lists exactly these, one "Op:<op>, Name=<name>" line each. The tracer asks
    on every shape it reads; JSON (written, then parsed) cost 16 times as long on a
    900-node graph, and its transient strings left the heap tens of MB larger."""
    return set(_OP_LINE.findall(symbol.debug_str()))


def cut_at_outputs(symbol, outputs):
    """`symbol` with each node output in `outputs` (a collection of (node name,
    output index)) replaced by a new variable, and without the nodes only those
    outputs read; returns the new Symbol and a dict from each new variable's name to
    its (node name, output index).

    Used for shape inference through nodes MXNet has no shape function for
    (`_cond`, `_while_loop`): their outputs become inputs of known shape."""
    graph = json.loads(symbol.tojson())
    nodes, kept_nodes, new_position, variables = graph["nodes"], [], {}, {}

    def reference(entry):
        key = (nodes[entry[0]]["name"], entry[1])
        if key not in outputs:
            return [new_position[entry[0]], entry[1], 0]
        if key not in variables:
            variables[key] = len(kept_nodes)
            kept_nodes.append({"op": "null", "name": "%s__output%d" % key, "inputs": []})
        return [variables[key], 0, 0]

    for position, node in enumerate(nodes):
        node = dict(node, inputs=[reference(entry) for entry in node["inputs"]])
        new_position[position] = len(kept_nodes)
        kept_nodes.append(node)
    heads = [reference(entry) for entry in graph["heads"]]
    # Only the nodes the heads still reach: those behind the cut (loops and branches,
    # their subgraphs with them) would cost their loading and inference at every call.
    reached, pending = set(), [entry[0] for entry in heads]
    while pending:
        position = pending.pop()
        if position not in reached:
            reached.add(position)
            pending.extend(entry[0] for entry in kept_nodes[position]["inputs"])
    order = sorted(reached)
    renumbered = {old: new for new, old in enumerate(order)}

    def moved(entry):
        return [renumbered[entry[0]], entry[1], entry[2]]
    nodes = [dict(kept_nodes[old], inputs=[moved(entry) for entry in kept_nodes[old]["inputs"]])
             for old in order]
    cut = {"nodes": nodes, "heads": [moved(entry) for entry in heads],
           "arg_nodes": [i for i, node in enumerate(nodes) if node["op"] == "null"]}
    return load_symbol(cut), {"%s__output%d" % key: key for key in variables
                              if variables[key] in reached}


def groups_between(graph, alone):
    """The operator nodes of `graph` (a JSON dict) as index lists in an order they
    can run in: each node of `alone` in a group of its own, the others grouped by
    stage, the number of `alone` nodes on the longest path to them (a node of
    `alone` counts itself). A path leaving a group through a node of `alone`
    reaches a later stage only, so the groups run one after another."""
    nodes = graph["nodes"]
    stages = {}
    for index, node in enumerate(nodes):
        if node["op"] == "null":
            continue
        here = index in alone
        stages[index] = max((stages[i] + (here or i in alone)
                             for i, _, _ in node["inputs"] if i in stages), default=0)
    groups = {}
    for index, stage in stages.items():
        groups.setdefault((stage, index) if index in alone else (stage, -1), []).append(index)
    # Groups of one stage are independent of each other; order them by first node.
    return sorted(groups.values(), key=lambda group: (stages[group[0]], group[0]))


def group_boundaries(graph, groups):
    """For each group of `groups_between`, the value refs ((node, output)) it reads
    from outside itself and those it gives to other groups or to the graph's heads."""
    nodes, row_ptr = graph["nodes"], graph["node_row_ptr"]
    owner = {index: k for k, group in enumerate(groups) for index in group}
    readers = {}
    for index, node in enumerate(nodes):
        for i, o, _ in node["inputs"]:
            readers.setdefault((i, o), []).append(index)
    heads = {(i, o) for i, o, _ in graph["heads"]}
    boundaries = []
    for k, group in enumerate(groups):
        inputs = []
        for index in group:
            inputs.extend(ref for ref in ((i, o) for i, o, _ in nodes[index]["inputs"])
                          if owner.get(ref[0]) != k and ref not in inputs)
        outputs = [(index, o) for index in group for o in range(row_ptr[index + 1] - row_ptr[index])
                   if (index, o) in heads or any(owner[r] != k for r in readers.get((index, o), ()))]
        boundaries.append((inputs, outputs))
    return boundaries


def value_input_name(graph, ref):
    """The name a value gets as the input of a group's graph: a variable's own
    name, else its producer's name and output index."""
    node = graph["nodes"][ref[0]]
    return node["name"] if node["op"] == "null" else "%s_output%d" % (node["name"], ref[1])


def group_symbol(graph, group, inputs, outputs):
    """The Symbol of one group of `graph`: its variables are `inputs` (named by
    `value_input_name`, in that order), its outputs `outputs` in order."""
    nodes, row_ptr = graph["nodes"], graph["node_row_ptr"]
    entries = [nodes[i] if nodes[i]["op"] == "null" else
               {"op": "null", "name": value_input_name(graph, (i, o)), "inputs": []}
               for i, o in inputs]
    position = {ref: (k, 0) for k, ref in enumerate(inputs)}
    pointers = [0] * (len(entries) + 1)
    pointers[1:] = range(1, len(entries) + 1)
    for index in group:
        node = nodes[index]
        entries.append(dict(node, inputs=[[*position[(i, o)], 0] for i, o, _ in node["inputs"]]))
        count = row_ptr[index + 1] - row_ptr[index]
        position.update({(index, o): (len(entries) - 1, o) for o in range(count)})
        pointers.append(pointers[-1] + count)
    return load_symbol({"nodes": entries, "arg_nodes": list(range(len(inputs))),
                        "node_row_ptr": pointers,
                        "heads": [[*position[ref], 0] for ref in outputs]})


CONTROL_FLOW_OPS = ("_cond", "_foreach", "_while_loop")
_PASS_THROUGH_OPS = ("identity", "_copy")


def read_outside_control_flow(symbol, names, ignored_ops=()):
    """Which of the variables `names` a top-level node of `symbol` computes with,
    other than control-flow nodes (which pass them to their subgraphs) and
    `ignored_ops`; identity copies are followed to what reads them."""
    graph = json.loads(symbol.tojson())
    nodes = graph["nodes"]
    readers = {}
    for index, node in enumerate(nodes):
        for entry in node["inputs"]:
            readers.setdefault(entry[0], []).append(index)
    not_computing = set(CONTROL_FLOW_OPS) | set(ignored_ops)

    def computed_with(index, seen):
        for reader in readers.get(index, ()):
            op = nodes[reader]["op"]
            if op in _PASS_THROUGH_OPS:
                if reader not in seen and computed_with(reader, seen | {reader}):
                    return True
            elif op not in not_computing:
                return True
        # An output of the graph as it is (`return x`) is a use too.
        return any(head[0] == index for head in graph["heads"])

    return {node["name"] for index, node in enumerate(nodes)
            if node["op"] == "null" and node["name"] in names and computed_with(index, {index})}
