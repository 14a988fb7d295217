"""Exported graphs that MXNet's static executor (Symbol.bind, simple_bind, Module)
can plan.

MXNet 1.9.1 cannot infer the shapes of `_cond` and `_while_loop` outputs before
they run, so the static executor gives every value computed from one no shape and
allocates it as it runs. Its memory planner then fails at bind ("Shape is
unknown") on an operator that may write its output over an input when that input
has a planned buffer (a value with a known shape computed inside the graph) and the
output has none: `while i.sum() < 3 and h.sum() < 2` after a loop on `h` is
broadcast_logical_and of a value computed before the loop and one computed after
it. A graph input is never planned over (its buffer is the caller's), and two
values after the loop have no plan to compare.

So export gives each such operator, in place of a planned input, a copy of it that
has no plan either: `take(expand_dims(x, 0), zero)`, with `zero` computed from the
shape of one of the operator's inputs that come after the loop. Same numbers; the
cost is one copy of that input per run, also under CachedOp (SymbolBlock.imports,
the C runtime), which plans nothing in advance and would not have needed it.
"""
import copy

from .. import graph_json
from ..graph_json import CONTROL_FLOW_OPS, UNINFERABLE_OPS


def plannable(graph):
    """A copy of a top-level JSON graph where no operator reads both a value the
    static executor knows the shape of (planned) and one it does not."""
    graph = copy.deepcopy(graph)
    nodes = graph["nodes"]
    unplanned, placed = set(), {}
    for index, node in enumerate(nodes):
        inputs = node["inputs"]
        after = [entry for entry in inputs if entry[0] in unplanned]
        if node["op"] in UNINFERABLE_OPS or after:
            unplanned.add(index)
        if not after or node["op"] in CONTROL_FLOW_OPS:
            continue   # control-flow nodes write no input's buffer
        planned = [position for position, entry in enumerate(inputs)
                   if entry[0] not in unplanned and nodes[entry[0]]["op"] != "null"]
        if not planned:
            continue
        zero = _zero_index(node["name"], after[0])
        made = zero[:]
        for position in planned:
            made += _unplanned_copy("%s_in%d" % (node["name"], position), inputs[position],
                                    zero[-1])
            inputs[position] = [made[-1], 0, 0]
        placed[index - 1] = made   # right before the operator, after all it reads
    if not placed:
        return graph
    return dict(graph_json.with_nodes_after(graph, placed),
                **{key: value for key, value in graph.items()
                   if key not in ("nodes", "heads", "arg_nodes", "node_row_ptr")})


def _zero_index(name, entry):
    """Nodes computing [0] (int64) from the shape of the value `entry`."""
    shape = graph_json.node("shape_array", name + "_unplanned_shape", [entry])
    first = graph_json.node("slice_axis", name + "_unplanned_dim", [[shape, 0, 0]],
                            axis="0", begin="0", end="1")
    return [shape, first, graph_json.node("_mul_scalar", name + "_unplanned_zero",
                                          [[first, 0, 0]], scalar="0")]


def _unplanned_copy(name, entry, zero):
    """Nodes copying the value `entry` through the index `zero`: its row of a
    one-row stack of it, axis 0 merged back."""
    stacked = graph_json.node("expand_dims", name + "_stacked", [entry], axis="0")
    row = graph_json.node("take", name + "_taken", [[stacked, 0, 0], [zero, 0, 0]], axis="0")
    return [stacked, row, graph_json.node("Reshape", name + "_unplanned", [[row, 0, 0]],
                                          shape="(-3, -2)")]
