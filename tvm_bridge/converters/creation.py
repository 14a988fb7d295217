"""Arrays made from attributes (zeros, ones, full, arange), from another array's shape
(arange_like) and shape_array."""
from tvm import relax
from tvm.relax import op as R

from .attrs import attr_bool, attr_float, attr_int, attr_str, attr_tuple
from .registry import Unsupported, register
from .tensor_info import dtype_of, normalize_axis, product, shape_of


def filled(node, value, zero_is_unknown=True):
    """`value` in the node's shape and dtype. A 0 in a legacy op's shape is a dim left
    to inference (unknown here); in an np op's, an empty dim."""
    dtype = attr_str(node, "dtype", "float32")
    shape = [int(d) for d in attr_tuple(node, "shape")]
    if zero_is_unknown and 0 in shape:
        raise Unsupported("a shape %s with unknown (0) dims" % (tuple(shape),))
    return R.full(shape, relax.const(value, dtype), dtype)


@register("_zeros")
def convert_zeros(ctx, node, args):
    """MXNet zeros(shape, dtype)."""
    return filled(node, 0)


@register("_ones")
def convert_ones(ctx, node, args):
    """MXNet ones(shape, dtype)."""
    return filled(node, 1)


@register("_full")
def convert_full(ctx, node, args):
    """MXNet full(shape, value, dtype)."""
    return filled(node, attr_float(node, "value"))


@register("_arange", "_npi_arange")
def convert_arange(ctx, node, args):
    """MXNet arange(start, stop=None, step) and np.arange: [0, start) when stop is None."""
    if attr_int(node, "repeat", 1) != 1 or attr_bool(node, "infer_range"):
        raise Unsupported("repeat != 1 or infer_range=True")
    start, stop = attr_float(node, "start", 0.0), attr_float(node, "stop")
    if stop is None:
        start, stop = 0.0, start
    return R.arange(start, stop, attr_float(node, "step", 1.0), attr_str(node, "dtype", "float32"))


@register("_contrib_arange_like")
def convert_arange_like(ctx, node, args):
    """MXNet contrib.arange_like(data, start, step, axis): start + step * k along data's
    `axis`, or over all its elements in its shape when axis is None; data's dtype
    (gluon_dyn's while_loop numbers its padding rows this way)."""
    if attr_int(node, "repeat", 1) != 1:
        raise Unsupported("repeat != 1")
    shape, axis = shape_of(args[0]), attr_int(node, "axis")
    length = product(shape) if axis is None else shape[normalize_axis(axis, len(shape))]
    dtype = dtype_of(args[0])
    values = ctx.emit(R.arange(0, length, 1, dtype))
    start, step = attr_float(node, "start", 0.0), attr_float(node, "step", 1.0)
    if step != 1.0:
        values = ctx.emit(R.multiply(values, relax.const(step, dtype)))
    if start != 0.0:
        values = ctx.emit(R.add(values, relax.const(start, dtype)))
    return values if axis is not None else R.reshape(values, shape)


@register("shape_array")
def convert_shape_array(ctx, node, args):
    """MXNet shape_array: the input's shape as an int64 1-d array."""
    return R.shape_to_tensor(ctx.emit(R.shape_of(args[0])))
