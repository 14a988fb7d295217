"""Cast, zeros_like/ones_like, clip, where, take and Embedding."""
from tvm import relax
from tvm.relax import op as R

from .attrs import attr_choice, attr_float, attr_int, attr_str
from .registry import register
from .tensor_info import dtype_of, ndim_of, shape_of

# MXNet indices arrive as floats; Relax gathers with integer indices.
_INDEX_DTYPE = "int32"


@register("Cast")  # `cast` is its alias
def convert_cast(ctx, node, args):
    """MXNet Cast(dtype)."""
    return R.astype(args[0], attr_str(node, "dtype"))


@register("zeros_like")
def convert_zeros_like(ctx, node, args):
    """MXNet zeros_like."""
    return R.zeros_like(args[0])


@register("ones_like")
def convert_ones_like(ctx, node, args):
    """MXNet ones_like."""
    return R.ones_like(args[0])


@register("clip")
def convert_clip(ctx, node, args):
    """MXNet clip(a_min, a_max): min(max(x, a_min), a_max)."""
    x = args[0]
    dtype = dtype_of(x)
    low = relax.const(attr_float(node, "a_min"), dtype)
    high = relax.const(attr_float(node, "a_max"), dtype)
    return R.minimum(ctx.emit(R.maximum(x, low)), high)


@register("where")
def convert_where(ctx, node, args):
    """MXNet where(cond, x, y): x where cond != 0; a 1-d cond selects whole rows."""
    cond, x, y = args
    if ndim_of(cond) == 1 and ndim_of(x) > 1:
        cond = ctx.emit(R.reshape(cond, [shape_of(cond)[0]] + [1] * (ndim_of(x) - 1)))
    mask = R.not_equal(cond, relax.const(0, dtype_of(cond)))
    return R.where(ctx.emit(mask), x, y)


def _indices(ctx, indices):
    return ctx.emit(R.astype(indices, _INDEX_DTYPE))


@register("take")
def convert_take(ctx, node, args):
    """MXNet take(a, indices, axis=0, mode=clip|wrap): gathers slices of a along axis."""
    mode = attr_choice(node, "mode", "clip", ("clip", "wrap"))
    return R.take(args[0], _indices(ctx, args[1]), axis=attr_int(node, "axis", 0), mode=mode)


@register("Embedding")
def convert_embedding(ctx, node, args):
    """MXNet Embedding(data, weight): rows of weight, indices clipped to the table."""
    return R.take(args[1], _indices(ctx, args[0]), axis=0, mode="clip")
