"""FullyConnected, dot and batch_dot."""
from tvm.relax import op as R

from .attrs import attr_bool
from .registry import Unsupported, register
from .tensor_info import ndim_of, product, shape_of


@register("FullyConnected")
def convert_fully_connected(ctx, node, args):
    """MXNet FullyConnected: y = x W^T + b; flatten=True first flattens x to 2-D."""
    no_bias = attr_bool(node, "no_bias")
    x, weight = args[0], args[1]
    if attr_bool(node, "flatten", True) and ndim_of(x) != 2:
        dims = shape_of(x)
        x = ctx.emit(R.reshape(x, (dims[0], product(dims[1:]))))
    y = R.matmul(x, R.permute_dims(weight))
    if no_bias:
        return y
    return R.add(ctx.emit(y), args[2])


def _transposed(x, transpose):
    return R.permute_dims(x) if transpose else x


@register("dot")
def convert_dot(ctx, node, args):
    """MXNet dot: contracts a's last axis with b's first (2-D may be transposed)."""
    a, b = args
    transpose_a, transpose_b = attr_bool(node, "transpose_a"), attr_bool(node, "transpose_b")
    if ndim_of(a) == 2 and ndim_of(b) == 2:
        return R.matmul(_transposed(a, transpose_a), _transposed(b, transpose_b))
    if transpose_a or transpose_b or ndim_of(a) < 2 or ndim_of(b) < 2:
        raise Unsupported("dot of %d-d and %d-d arrays with transposes or vectors" % (
            ndim_of(a), ndim_of(b)))
    a_dims, b_dims = shape_of(a), shape_of(b)
    a2 = ctx.emit(R.reshape(a, (product(a_dims[:-1]), a_dims[-1])))
    b2 = ctx.emit(R.reshape(b, (b_dims[0], product(b_dims[1:]))))
    return R.reshape(ctx.emit(R.matmul(a2, b2)), a_dims[:-1] + b_dims[1:])


@register("batch_dot")
def convert_batch_dot(ctx, node, args):
    """MXNet batch_dot: per-batch matrix product of 3-d arrays, optional transposes."""
    a, b = args
    if ndim_of(a) != 3 or ndim_of(b) != 3:
        raise Unsupported("batch_dot of %d-d and %d-d arrays (only 3-d)" % (ndim_of(a), ndim_of(b)))
    if attr_bool(node, "transpose_a"):
        a = R.permute_dims(a, (0, 2, 1))
    if attr_bool(node, "transpose_b"):
        b = R.permute_dims(b, (0, 2, 1))
    return R.matmul(a, b)
