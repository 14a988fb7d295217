"""Which outputs of a graph have a gradient MXNet's backward would consume.

MXNet's loop and branch backward (cached_op.cc, "in_attrs->size() ==
bwd_input_eid.size()") assumes the gradient of every subgraph output is used on
a path to some input. An output computed only through operators whose gradient
is zero by definition (comparisons, rounding, argmax, constants) breaks that, so
such outputs are found here and tied to an input (see subgraph.ensure_gradient_flow).
"""
import json

# Operators whose gradient is zero by definition: MXNet's backward does not read
# the gradient flowing into them.
ZERO_GRADIENT_OPS = frozenset([
    "_equal", "_not_equal", "_greater", "_greater_equal", "_lesser", "_lesser_equal",
    "_equal_scalar", "_not_equal_scalar", "_greater_scalar", "_greater_equal_scalar",
    "_lesser_scalar", "_lesser_equal_scalar",
    "broadcast_equal", "broadcast_not_equal", "broadcast_greater", "broadcast_greater_equal",
    "broadcast_lesser", "broadcast_lesser_equal",
    "_logical_and", "_logical_or", "_logical_xor", "logical_not",
    "_logical_and_scalar", "_logical_or_scalar", "_logical_xor_scalar",
    "broadcast_logical_and", "broadcast_logical_or", "broadcast_logical_xor",
    "zeros_like", "ones_like", "_zeros", "_ones", "_full", "_arange", "_contrib_arange_like",
    "shape_array", "size_array", "argmax", "argmin", "argmax_channel", "argsort",
    "round", "rint", "ceil", "floor", "trunc", "fix", "sign", "BlockGrad", "one_hot",
])


# Inputs (by position) through which an operator passes no gradient: a condition,
# indices, or an array only its shape is taken from.
NON_DIFFERENTIABLE_INPUTS = {
    "where": {0}, "broadcast_like": {1}, "reshape_like": {1}, "slice_like": {1},
    "take": {1}, "pick": {1}, "batch_take": {1}, "gather_nd": {1}, "Embedding": {0},
    "_contrib_boolean_mask": {1}, "_npi_boolean_mask": {1},
}


def gradient_dead_outputs(graph):
    """Indices of `graph`'s outputs with no differentiable path to any input."""
    nodes = json.loads(graph.tojson())["nodes"]
    alive = []
    for node in nodes:
        if node["op"] == "null":
            alive.append(True)
        elif node["op"] in ZERO_GRADIENT_OPS or node["op"].startswith(("_random_", "_sample_")):
            alive.append(False)
        else:
            blocked = NON_DIFFERENTIABLE_INPUTS.get(node["op"], ())
            alive.append(any(alive[entry[0]] for position, entry in enumerate(node["inputs"])
                             if position not in blocked))
    heads = json.loads(graph.tojson())["heads"]
    return [i for i, head in enumerate(heads) if not alive[head[0]]]
