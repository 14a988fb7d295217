"""Which outputs of a graph have a gradient MXNet's backward would consume.

MXNet's loop and branch backward (cached_op.cc, "in_attrs->size() ==
bwd_input_eid.size()") assumes the gradient of every subgraph output is used on
a path to some input. An output computed only through operators whose gradient
is zero by definition (comparisons, rounding, argmax, constants) breaks that, so
such outputs are found here and tied to an input (see subgraph.ensure_gradient_flow).
"""
import json

import mxnet as mx
from mxnet import autograd

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
    # MXNet's numpy interface (np mode)
    "_npi_equal", "_npi_not_equal", "_npi_greater", "_npi_greater_equal", "_npi_less",
    "_npi_less_equal", "_npi_equal_scalar", "_npi_not_equal_scalar", "_npi_greater_scalar",
    "_npi_greater_equal_scalar", "_npi_less_scalar", "_npi_less_equal_scalar",
    "_npi_logical_not", "_npi_bitwise_and", "_npi_bitwise_or", "_npi_bitwise_xor",
    "_npi_bitwise_not", "_npi_bitwise_and_scalar", "_npi_bitwise_or_scalar",
    "_npi_bitwise_xor_scalar", "_npi_isnan", "_npi_isinf", "_npi_isfinite",
    "_npi_zeros", "_npi_ones", "_npi_full_like", "_npi_arange", "_npi_argmax", "_npi_argmin",
    "_npi_around", "_npi_rint", "_npi_ceil", "_npi_floor", "_npi_trunc", "_npi_fix", "_npi_sign",
    "_npx_nonzero",
])


# Inputs (by position) through which an operator passes no gradient: a condition,
# indices, or an array only its shape is taken from.
NON_DIFFERENTIABLE_INPUTS = {
    "where": {0}, "broadcast_like": {1}, "reshape_like": {1}, "slice_like": {1},
    "take": {1}, "pick": {1}, "batch_take": {1}, "gather_nd": {1}, "Embedding": {0},
    "_contrib_boolean_mask": {1}, "_npi_boolean_mask": {1}, "_npi_where": {0},
}


def gradient_dead_outputs(graph):
    """Indices of `graph`'s outputs with no differentiable path to any input."""
    graph_json = json.loads(graph.tojson())
    alive = []
    for node in graph_json["nodes"]:
        if node["op"] == "null":
            alive.append(True)
        elif node["op"] in ZERO_GRADIENT_OPS or node["op"].startswith(("_random_", "_sample_")):
            alive.append(False)
        else:
            blocked = NON_DIFFERENTIABLE_INPUTS.get(node["op"], ())
            alive.append(any(alive[entry[0]] for position, entry in enumerate(node["inputs"])
                             if position not in blocked))
    return [i for i, head in enumerate(graph_json["heads"]) if not alive[head[0]]]



def has_history(array):
    """Whether autograd recorded `array` or marks it (attach_grad): MXNet 1.9.1 gives
    the recorded graph of such an array only. Imperatively MXNet records no operation
    whose inputs all lack history.

    An array without history that a recorded operation read gets a variable node with
    no gradient buffer (imperative.cc's RecordOp): still no history. A graph's kept
    constants are read by every recorded run, so after the first they all have one."""
    try:
        recorded = autograd.get_symbol(array)
    except mx.base.MXNetError:
        return False
    return recorded.get_children() is not None or array.grad is not None


def outputs_reading_only(graph, names):
    """{output index: the inputs it reads} of `graph`'s outputs that read no input but
    those named in `names` (none, for an output computed from constants alone)."""
    graph_json = json.loads(graph.tojson())
    reads = []   # per node: the inputs it reads, or None if it reads one not in `names`
    for node in graph_json["nodes"]:
        if node["op"] == "null":
            reads.append(frozenset([node["name"]]) if node["name"] in names else None)
            continue
        found = [reads[entry[0]] for entry in node["inputs"]]
        reads.append(None if None in found else frozenset().union(*found))
    return {i: reads[head[0]] for i, head in enumerate(graph_json["heads"])
            if reads[head[0]] is not None}
