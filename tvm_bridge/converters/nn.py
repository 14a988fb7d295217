"""Convolution, Pooling and BatchNorm (2-d, NCHW, inference)."""
from tvm import relax
from tvm.relax import op as R

from .attrs import attr_bool, attr_choice, attr_float, attr_int, attr_str, attr_tuple
from .registry import Unsupported, register
from .tensor_info import dtype_of, ndim_of, normalize_axis, shape_of


def _require_2d_nchw(node, x, kernel):
    if ndim_of(x) != 4 or (kernel is not None and len(kernel) != 2):
        raise Unsupported("only 2-d (4-d NCHW input) is supported, got a %d-d input" % ndim_of(x))
    layout = attr_str(node, "layout")
    if layout not in (None, "NCHW"):
        raise Unsupported("layout %s (only NCHW)" % layout)


def _pair(node, key, default):
    value = attr_tuple(node, key) or default
    return tuple(int(v) for v in value)


def _channel_vector(vector, ndim, axis):
    """A (C,) vector reshaped to broadcast along ``axis`` of an ndim-d tensor."""
    shape = [1] * ndim
    shape[axis] = -1
    return R.reshape(vector, shape)


@register("Convolution")
def convert_convolution(ctx, node, args):
    """MXNet Convolution 2-d: kernel, stride, pad, dilate, num_group, no_bias."""
    x, weight = args[0], args[1]
    _require_2d_nchw(node, x, attr_tuple(node, "kernel"))
    y = R.nn.conv2d(x, weight, strides=_pair(node, "stride", (1, 1)),
                    padding=_pair(node, "pad", (0, 0)), dilation=_pair(node, "dilate", (1, 1)),
                    groups=attr_int(node, "num_group", 1))
    if attr_bool(node, "no_bias"):
        return y
    return R.add(ctx.emit(y), _channel_vector(args[2], 4, 1))


def _check_full_windows(sizes, options):
    """Declines pooling_convention='full' where MXNet keeps a last window lying wholly in
    the padding: Relax's ceil_mode drops that window, as PyTorch does."""
    for size, kernel, stride, pad in zip(sizes, options["pool_size"], options["strides"],
                                         options["padding"]):
        if not isinstance(size, int):
            raise Unsupported("pooling_convention='full' on a symbolic spatial dim")
        windows = 1 + -(-(size + 2 * pad - kernel) // stride)
        if (windows - 1) * stride >= size + pad:
            raise Unsupported("pooling_convention='full' with a last window wholly in the "
                              "padding (MXNet keeps it, Relax drops it)")


@register("Pooling")
def convert_pooling(ctx, node, args):
    """MXNet Pooling 2-d: max/avg, global_pool, pooling_convention valid|full, count_include_pad."""
    x = args[0]
    pool_type = attr_choice(node, "pool_type", "max", ("max", "avg"))
    if attr_bool(node, "global_pool"):
        _require_2d_nchw(node, x, None)
        reduce = R.max if pool_type == "max" else R.mean
        return reduce(x, [2, 3], keepdims=True)
    kernel = attr_tuple(node, "kernel")
    _require_2d_nchw(node, x, kernel)
    convention = attr_choice(node, "pooling_convention", "valid", ("valid", "full"))
    options = dict(pool_size=tuple(int(k) for k in kernel), strides=_pair(node, "stride", (1, 1)),
                   padding=_pair(node, "pad", (0, 0)), ceil_mode=convention == "full")
    if options["ceil_mode"]:
        _check_full_windows(shape_of(x)[2:], options)
    if pool_type == "max":
        return R.nn.max_pool2d(x, **options)
    return R.nn.avg_pool2d(x, count_include_pad=attr_bool(node, "count_include_pad", True),
                           **options)


@register("BatchNorm")
def convert_batch_norm(ctx, node, args):
    """MXNet BatchNorm at inference: (x - moving_mean) / sqrt(moving_var + eps) * gamma + beta.

    fix_gamma=True (MXNet's default) means gamma is taken as 1. Only the first
    output exists at inference; the batch mean/var outputs are not produced.
    """
    x, gamma, beta, moving_mean, moving_var = args
    if attr_bool(node, "output_mean_var"):
        raise Unsupported("output_mean_var=True (batch statistics are a training output)")
    dtype = dtype_of(x)
    axis = normalize_axis(attr_int(node, "axis", 1), ndim_of(x))
    inv_std = R.rsqrt(ctx.emit(R.add(moving_var, relax.const(attr_float(node, "eps", 1e-3), dtype))))
    scale = ctx.emit(inv_std if attr_bool(node, "fix_gamma", True) else R.multiply(gamma, inv_std))
    shift = ctx.emit(R.subtract(beta, ctx.emit(R.multiply(moving_mean, scale))))
    y = ctx.emit(R.multiply(x, _channel_vector(scale, ndim_of(x), axis)))
    return R.add(y, _channel_vector(shift, ndim_of(x), axis))
