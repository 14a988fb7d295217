"""Whether a body's graph computes each node's rows independently, so that many
nodes can run as one call with their inputs stacked along a batch axis.

Each node's inputs (its own arrays, its callees' results) have a leading axis of
size 1. Stacked, that axis holds B nodes; every value of the graph then has a
batch axis (or none, for values made of parameters only) that each operator
must carry through without mixing rows (DyNet's autobatching and TensorFlow
Fold make the same per-operator decision). A value that lost that axis (a row
picked by an index, `x[tree.idx]`) is batched along an extra one instead
(new_axis.py). Operators and attributes not known to be row-wise make the body
run one node per call.
"""
import ast
import json

import mxnet as mx

from ... import graph_json
from . import new_axis
from .new_axis import NEW


class NotBatchable(Exception):
    """Why a body runs one node per call."""


def batch_axes(symbol, batched_inputs, shapes):
    """(the symbol to run batched, the batch axis of each of its outputs (None: not
    batched)) when the inputs named in `batched_inputs` are stacked along axis 0.
    The symbol is `symbol`, rewritten where values are batched along an extra
    axis (new_axis.py). Raises NotBatchable."""
    for name in batched_inputs:
        if shapes[name][:1] != (1,):
            raise NotBatchable("input %s has shape %s: stacking needs a leading axis of size 1"
                               % (name, shapes[name]))
    graph = json.loads(symbol.tojson())
    nodes = graph["nodes"]
    value_shapes = _value_shapes(symbol, shapes)
    axes, rewritten, placed = {}, False, {}
    for index, node in enumerate(nodes):
        name, op = node["name"], node["op"]
        if op == "null":
            axes[(index, 0)] = 0 if name in batched_inputs else None
            continue
        refs = [(source, output) for source, output, _ in node["inputs"]]
        in_axes = [axes[ref] for ref in refs]
        outputs = _output_count(node)
        if all(axis is None for axis in in_axes):
            axis = None
        else:
            in_shapes = [value_shapes.get(_value_name(nodes, ref)) for ref in refs]
            out_shape = value_shapes.get(_value_name(nodes, (index, 0)))
            attrs = {key: _literal(value) for key, value in node.get("attrs", {}).items()}
            known = out_shape is not None and all(shape is not None for shape in in_shapes)
            if known and (NEW in in_axes or new_axis.starts(op, attrs, in_axes, in_shapes)):
                axis, rewritten = new_axis.rule(node, attrs, in_axes, in_shapes, out_shape), True
            else:
                rule = RULES.get(op)
                if rule is None:
                    raise NotBatchable("operator %s (%s) is not known to compute rows "
                                       "independently" % (op, name))
                if not known:
                    raise NotBatchable("the shapes around %s (%s) are not known" % (op, name))
                axis = rule(attrs, in_axes, in_shapes, out_shape)
                if axis is None and rule is _broadcast:
                    axis = _aligned_broadcast(nodes, index, in_axes, in_shapes, out_shape, placed)
            if axis is None:
                raise NotBatchable("%s (%s) mixes the rows of different nodes" % (op, name))
        for output in range(outputs):
            axes[(index, output)] = axis
    found = [axes[(source, output)] for source, output, _ in graph["heads"]]
    _skip_dropped(graph)
    if placed:
        graph, rewritten = graph_json.with_nodes_after(graph, placed), True
    return (graph_json.load_symbol(graph) if rewritten else symbol), found


def _skip_dropped(graph):
    """Whatever reads a node new_axis dropped reads the node's input instead (an
    output of the graph that would be an input as it came keeps the node)."""
    nodes = graph["nodes"]
    replacements = {}
    for index, node in enumerate(nodes):
        if node["op"] == new_axis.DROPPED and node.get("attrs") == {}:
            source = node["inputs"][0]
            replacements[(index, 0)] = replacements.get((source[0], source[1]), source)
    heads = {(entry[0], entry[1]) for entry in graph["heads"]}
    replacements = {ref: entry for ref, entry in replacements.items()
                    if ref not in heads or nodes[entry[0]]["op"] != "null"}
    graph_json.rewire(graph, replacements)


def _output_count(node):
    if node["op"] == "SliceChannel":
        return int(node.get("attrs", {}).get("num_outputs", 1))
    return 1


def _value_name(nodes, ref):
    node = nodes[ref[0]]
    if node["op"] == "null":
        return node["name"]
    if _output_count(node) > 1:
        return "%s_output%d" % (node["name"], ref[1])
    return "%s_output" % node["name"]


def _value_shapes(symbol, shapes):
    internals = symbol.get_internals()
    needed = set(internals.list_inputs())
    try:
        _, out_shapes, _ = internals.infer_shape_partial(
            **{name: shape for name, shape in shapes.items() if name in needed})
    except mx.base.MXNetError:
        return {}
    return {name: tuple(shape) for name, shape in zip(internals.list_outputs(), out_shapes)
            if shape and 0 not in shape}


def _literal(text):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _normal(axis, rank):
    return axis + rank if axis < 0 else axis


def _axis_tuple(value, rank):
    if value is None or value == ():
        return None
    values = value if isinstance(value, (tuple, list)) else (value,)
    return tuple(_normal(int(a), rank) for a in values)


def _first_only(attrs, axes, shapes, out):
    """Operators on their first input, elementwise (others are parameters)."""
    return axes[0] if all(axis is None for axis in axes[1:]) else None


def _all_same(attrs, axes, shapes, out):
    """Elementwise over inputs of one shape: all stacked, along the same axis."""
    return axes[0] if len(set(axes)) == 1 else None


def _broadcast(attrs, axes, shapes, out):
    rank = len(out)
    positions = {axis + rank - len(shape) for axis, shape in zip(axes, shapes)
                 if axis is not None}
    if len(positions) != 1:
        return None
    position = positions.pop()
    for axis, shape in zip(axes, shapes):
        at = position - (rank - len(shape))
        if axis is None and at >= 0 and shape[at] != 1:
            return None
    return position


def _aligned_broadcast(nodes, index, axes, shapes, out, placed):
    """A broadcasting operator whose rows (along axis 0) have fewer axes than its
    output (`h + F.dot(hc, w)`: (1, C) with (1, K, C)): per node they broadcast
    as (1, 1, C), so the batched rows are reshaped to (B, 1, C), a node placed
    in `placed` before the operator. Their axis 0 then leads the output; None
    where the operands do not line up so."""
    rank = len(out)
    if any(axis not in (0, None) for axis in axes) or any(
            axis is None and len(shape) == rank and shape[0] != 1
            for axis, shape in zip(axes, shapes)):
        return None
    node = nodes[index]
    for position, (axis, shape) in enumerate(zip(axes, shapes)):
        if axis == 0 and len(shape) < rank:
            aligned = graph_json.node("Reshape", "%s_rows%d" % (node["name"], position),
                                      [node["inputs"][position]],
                                      shape=str((-1,) + (1,) * (rank - len(shape)) + shape[1:]))
            placed.setdefault(index - 1, []).append(aligned)
            node["inputs"][position] = [aligned, 0, 0]
    return 0


def _fully_connected(attrs, axes, shapes, out):
    if any(axis is not None for axis in axes[1:]):
        return None
    flatten = attrs.get("flatten", True) not in (False, "False", "false", 0)
    axis = axes[0]
    if flatten:
        return 0 if axis == 0 else None
    return axis if axis < len(shapes[0]) - 1 else None


def _on_axis(default, name="axis"):
    """Operators along one axis (softmax, slice_axis, split): any but the batch axis."""
    def rule(attrs, axes, shapes, out):
        axis = axes[0]
        if any(a is not None for a in axes[1:]):
            return None
        along = _normal(int(attrs.get(name, default)), len(shapes[0]))
        if along == axis:
            return None
        if attrs.get("squeeze_axis") in (True, 1, "True", "true") and along < axis:
            return axis - 1
        return axis
    return rule


def _slice(attrs, axes, shapes, out):
    axis = axes[0]
    begin, end = attrs.get("begin", ()), attrs.get("end", ())
    step = attrs.get("step", ()) or ()
    if axis < len(begin):
        if begin[axis] not in (None, 0) or end[axis] is not None or \
                (axis < len(step) and step[axis] not in (None, 1)):
            return None
    return axis


def _concat(attrs, axes, shapes, out):
    if len(set(axes)) != 1:
        return None
    along = _normal(int(attrs.get("dim", 1)), len(shapes[0]))
    return axes[0] if along != axes[0] else None


def _stack(attrs, axes, shapes, out):
    if len(set(axes)) != 1:
        return None
    along = _normal(int(attrs.get("axis", 0)), len(out))
    return axes[0] + 1 if along <= axes[0] else axes[0]


def _expand_dims(attrs, axes, shapes, out):
    along = _normal(int(attrs["axis"]), len(out))
    return axes[0] + 1 if along <= axes[0] else axes[0]


def _squeeze(attrs, axes, shapes, out):
    squeezed = _axis_tuple(attrs.get("axis"), len(shapes[0]))
    if squeezed is None or axes[0] in squeezed:
        return None
    return axes[0] - sum(1 for a in squeezed if a < axes[0])


def _reshape(attrs, axes, shapes, out):
    shape = attrs.get("shape", ())
    if axes[0] == 0 and shape and shape[0] == 0 and not attrs.get("reverse", False):
        return 0
    return None


def _flatten(attrs, axes, shapes, out):
    return 0 if axes[0] == 0 else None


def _transpose(attrs, axes, shapes, out):
    order = attrs.get("axes", ()) or tuple(reversed(range(len(shapes[0]))))
    return list(order).index(axes[0])


def _swap(attrs, axes, shapes, out):
    rank = len(shapes[0])
    first, second = (_normal(int(attrs.get(name, 0)), rank) for name in ("dim1", "dim2"))
    return {first: second, second: first}.get(axes[0], axes[0])


def _reduce(attrs, axes, shapes, out):
    rank = len(shapes[0])
    reduced = _axis_tuple(attrs.get("axis"), rank)
    if reduced is None:
        return None
    if attrs.get("exclude", False) in (True, 1, "True", "true"):
        reduced = tuple(a for a in range(rank) if a not in reduced)
    if axes[0] in reduced:
        return None
    if attrs.get("keepdims", False) in (True, 1, "True", "true"):
        return axes[0]
    return axes[0] - sum(1 for a in reduced if a < axes[0])


def _take(attrs, axes, shapes, out):
    data_axis, index_axis = axes[0], axes[1]
    along = _normal(int(attrs.get("axis", 0)), len(shapes[0]))
    if data_axis is None:
        return along + index_axis
    if index_axis is not None or along == data_axis:
        return None
    return data_axis if along > data_axis else data_axis + len(shapes[1]) - 1


def _dot(attrs, axes, shapes, out):
    if axes[1] is not None or axes[0] != 0 or len(shapes[0]) < 2 or \
            attrs.get("transpose_a", False) in (True, "True", "true"):
        return None
    return 0


def _batch_first(attrs, axes, shapes, out):
    """Convolution, pooling: per-sample operators over a leading batch axis."""
    return 0 if axes[0] == 0 and all(a is None for a in axes[1:]) else None


_UNARY = ("Activation sigmoid tanh relu softsign exp log log1p expm1 sqrt rsqrt cbrt square abs "
          "negative identity _copy BlockGrad stop_gradient make_loss Cast clip sign floor ceil "
          "round rint fix trunc reciprocal erf sin cos tan sinh cosh tanh arcsin arccos arctan "
          "gamma gammaln _plus_scalar _minus_scalar _rminus_scalar _mul_scalar _div_scalar "
          "_rdiv_scalar _power_scalar _rpower_scalar _maximum_scalar _minimum_scalar _mod_scalar "
          "_equal_scalar _not_equal_scalar _greater_scalar _greater_equal_scalar _lesser_scalar "
          "_lesser_equal_scalar zeros_like ones_like logical_not Dropout LeakyReLU one_hot "
          "Embedding").split()
_SAME = ("elemwise_add elemwise_sub elemwise_mul elemwise_div _plus _minus _mul _div _grad_add "
         "_maximum _minimum _equal _not_equal _greater _greater_equal _lesser _lesser_equal "
         "_power _hypot _mod add_n ElementWiseSum _logical_and _logical_or _logical_xor "
         "where").split()
_BROADCAST = ("broadcast_add broadcast_plus broadcast_sub broadcast_minus broadcast_mul "
              "broadcast_div broadcast_mod broadcast_power broadcast_maximum broadcast_minimum "
              "broadcast_hypot broadcast_equal broadcast_not_equal broadcast_greater "
              "broadcast_greater_equal broadcast_lesser broadcast_lesser_equal "
              "broadcast_logical_and broadcast_logical_or broadcast_logical_xor").split()

RULES = {**{op: _first_only for op in _UNARY}, **{op: _all_same for op in _SAME},
         **{op: _broadcast for op in _BROADCAST},
         "FullyConnected": _fully_connected, "softmax": _on_axis(-1), "log_softmax": _on_axis(-1),
         "LayerNorm": _on_axis(-1), "slice_axis": _on_axis(0),
         "SliceChannel": _on_axis(1), "slice": _slice, "Concat": _concat, "concat": _concat,
         "stack": _stack, "expand_dims": _expand_dims, "squeeze": _squeeze, "Reshape": _reshape,
         "reshape": _reshape, "Flatten": _flatten, "flatten": _flatten, "transpose": _transpose,
         "SwapAxis": _swap, "swapaxes": _swap, "sum": _reduce, "mean": _reduce, "max": _reduce,
         "min": _reduce, "prod": _reduce, "nansum": _reduce, "nanprod": _reduce,
         "argmax": _reduce, "argmin": _reduce, "take": _take, "dot": _dot,
         "Convolution": _batch_first, "Pooling": _batch_first}
