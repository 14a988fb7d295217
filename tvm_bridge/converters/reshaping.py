"""Reshape (with MXNet's special codes), Flatten, expand_dims, squeeze, transpose."""
from tvm import tirx
from tvm.relax import op as R

from .attrs import attr_axes, attr_bool, attr_int, attr_tuple
from .registry import Unsupported, register
from .tensor_info import ndim_of, normalize_axis, product, shape_of


def _floordiv(a, b):
    return a // b if isinstance(a, int) and isinstance(b, int) else tirx.floordiv(a, b)


def _split_dim(dim, first, second):
    """The two dims -4 splits ``dim`` into; one of them may be -1 (inferred)."""
    if first == -1:
        first = _floordiv(dim, second)
    elif second == -1:
        second = _floordiv(dim, first)
    return [first, second]


def mxnet_reshape_dims(dims, codes):
    """The output dims of MXNet Reshape; -1 is left for Relax to infer.

    Codes: 0 copies an input dim, -1 infers one dim, -2 copies all remaining
    dims, -3 merges two input dims, -4 splits one into the next two codes.
    """
    out, src, j = [], 0, 0
    while j < len(codes):
        code = codes[j]
        if code == -2:
            out.extend(dims[src:])
            src = len(dims)
        elif code == -3:
            out.append(dims[src] * dims[src + 1])
            src += 2
        elif code == -4:
            out.extend(_split_dim(dims[src], codes[j + 1], codes[j + 2]))
            src += 1
            j += 2
        elif code < -4:
            raise ValueError("Reshape code %d is not one of MXNet's (0, -1, -2, -3, -4)" % code)
        else:
            out.append(dims[src] if code == 0 else code)
            src += 1
        j += 1
    if out.count(-1) > 1:
        raise ValueError("Reshape %s infers more than one dim" % (tuple(codes),))
    return out


@register("Reshape")  # `reshape` is its alias
def convert_reshape(ctx, node, args):
    """MXNet Reshape(shape) with codes 0/-1/-2/-3/-4 (reverse=False)."""
    if attr_bool(node, "reverse"):
        raise Unsupported("reverse=True")
    if attr_tuple(node, "target_shape"):
        raise Unsupported("the deprecated target_shape attribute")
    codes = [int(c) for c in attr_tuple(node, "shape")]
    return R.reshape(args[0], mxnet_reshape_dims(shape_of(args[0]), codes))


@register("reshape_like")
def convert_reshape_like(ctx, node, args):
    """MXNet reshape_like(lhs, rhs): lhs in rhs's shape (the whole shape only)."""
    if any(key in node.attrs for key in ("lhs_begin", "lhs_end", "rhs_begin", "rhs_end")):
        raise Unsupported("reshape_like of partial shapes (lhs_begin/rhs_begin...)")
    return R.reshape(args[0], shape_of(args[1]))


@register("broadcast_to")
def convert_broadcast_to(ctx, node, args):
    """MXNet broadcast_to(shape): a 0 in shape keeps the input's dim."""
    dims = shape_of(args[0])
    shape = [dims[k] if d == 0 else int(d) for k, d in enumerate(attr_tuple(node, "shape"))]
    return R.broadcast_to(args[0], shape)


@register("broadcast_like")
def convert_broadcast_like(ctx, node, args):
    """MXNet broadcast_like(lhs, rhs): lhs broadcast to rhs's whole shape."""
    if attr_axes(node, "lhs_axes") or attr_axes(node, "rhs_axes"):
        raise Unsupported("broadcast_like over chosen axes")
    return R.broadcast_to(args[0], shape_of(args[1]))


@register("Flatten")  # `flatten` is its alias
def convert_flatten(ctx, node, args):
    """MXNet Flatten: (d0, d1*d2*...)."""
    dims = shape_of(args[0])
    return R.reshape(args[0], (dims[0], product(dims[1:])))


@register("expand_dims")
def convert_expand_dims(ctx, node, args):
    """MXNet expand_dims(axis): a new axis of size 1 (axis may be -ndim-1..ndim)."""
    axis = attr_int(node, "axis")
    return R.expand_dims(args[0], normalize_axis(axis, ndim_of(args[0]) + 1))


@register("squeeze", "_np_squeeze")
def convert_squeeze(ctx, node, args):
    """MXNet squeeze(axis=None) and np.squeeze: drops the given (or all) axes of size 1."""
    axes = attr_axes(node)
    return R.squeeze(args[0], None if axes is None else list(axes))


@register("transpose")
def convert_transpose(ctx, node, args):
    """MXNet transpose(axes): permutes axes; empty axes reverses them."""
    axes = attr_axes(node, "axes")
    return R.permute_dims(args[0], list(axes) if axes else None)


@register("SwapAxis")  # `swapaxes` is its alias
def convert_swap_axis(ctx, node, args):
    """MXNet SwapAxis(dim1=0, dim2=0): exchanges two axes."""
    ndim = ndim_of(args[0])
    axes = list(range(ndim))
    first = normalize_axis(attr_int(node, "dim1", 0), ndim)
    second = normalize_axis(attr_int(node, "dim2", 0), ndim)
    axes[first], axes[second] = axes[second], axes[first]
    return R.permute_dims(args[0], axes)
