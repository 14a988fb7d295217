"""split/SliceChannel, slice, slice_axis, concat and stack."""
from tvm import relax
from tvm.relax import op as R

from .attrs import attr_bool, attr_int, attr_tuple
from .registry import register
from .tensor_info import ndim_of, normalize_axis, shape_of


@register("SliceChannel")  # `split` is its alias
def convert_split(ctx, node, args):
    """MXNet split: num_outputs equal parts along axis (default 1), optionally squeezed."""
    x = args[0]
    num_outputs = attr_int(node, "num_outputs")
    axis = normalize_axis(attr_int(node, "axis", 1), ndim_of(x))
    outputs = equal_parts(ctx, x, num_outputs, axis)
    if attr_bool(node, "squeeze_axis"):
        outputs = [R.squeeze(ctx.emit(part), [axis]) for part in outputs]
    return outputs


def equal_parts(ctx, x, count, axis):
    """`x` cut into `count` equal parts along `axis`.

    Where that dim is static the parts are strided slices: each fuses into the
    kernel that consumes it, where Relax's split is a kernel of its own (a
    recurrent cell splits its gates once per step)."""
    if count == 1:  # Relax's split of one section is the tensor itself, not a tuple
        return [x]
    dim = shape_of(x)[axis]
    if isinstance(dim, int) and dim % count == 0:
        size = dim // count
        return [R.strided_slice(x, [axis], [k * size], [(k + 1) * size]) for k in range(count)]
    parts = ctx.emit(R.split(x, count, axis=axis))
    return [relax.TupleGetItem(parts, k) for k in range(count)]


def _slice_bounds(begin, end, step, dim):
    """MXNet's defaults for None bounds (which depend on the step's sign)."""
    if begin is None:
        begin = 0 if step > 0 else dim - 1
    if end is None:
        end = dim if step > 0 else -dim - 1
    return begin, end


@register("slice")
def convert_slice(ctx, node, args):
    """MXNet slice(begin, end, step): per-axis strided slice of the leading axes; None = default."""
    x = args[0]
    begin, end = attr_tuple(node, "begin"), attr_tuple(node, "end")
    step = attr_tuple(node, "step", ()) or ()
    if len(begin) != len(end) or len(begin) > ndim_of(x) or len(step) > len(begin):
        raise ValueError("slice %r: begin %s, end %s, step %s do not fit a %d-d input" % (
            node.name, begin, end, step, ndim_of(x)))
    dims = shape_of(x)
    axes, begins, ends, steps = [], [], [], []
    for axis, (b, e) in enumerate(zip(begin, end)):
        s = step[axis] if axis < len(step) and step[axis] is not None else 1
        if s == 0:
            raise ValueError("slice %r: step 0 on axis %d" % (node.name, axis))
        b, e = _slice_bounds(b, e, s, dims[axis])
        axes.append(axis)
        begins.append(b)
        ends.append(e)
        steps.append(s)
    return R.strided_slice(x, axes, begins, ends, steps)


@register("slice_axis")
def convert_slice_axis(ctx, node, args):
    """MXNet slice_axis(axis, begin, end): x[..., begin:end, ...] on one axis; end None = to the end."""
    x = args[0]
    axis = normalize_axis(attr_int(node, "axis"), ndim_of(x))
    begin, end = _slice_bounds(attr_int(node, "begin"), attr_int(node, "end"), 1, shape_of(x)[axis])
    return R.strided_slice(x, [axis], [begin], [end])


@register("Concat")  # `concat` is its alias
def convert_concat(ctx, node, args):
    """MXNet concat(dim=1): joins inputs along an existing axis."""
    return R.concat(args, axis=attr_int(node, "dim", 1))


@register("stack")
def convert_stack(ctx, node, args):
    """MXNet stack(axis=0): joins inputs along a new axis."""
    return R.stack(args, axis=attr_int(node, "axis", 0))
