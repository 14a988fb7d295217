"""sum/mean/max/min/prod and argmax/argmin."""
from tvm.relax import op as R

from .attrs import attr_axes, attr_bool, attr_int
from .registry import register
from .tensor_info import dtype_of, ndim_of, normalize_axis

_REDUCTIONS = {"sum": R.sum, "mean": R.mean, "max": R.max, "min": R.min, "prod": R.prod}


def _reduced_axes(node, ndim):
    """The axes reduced: ``axis`` (all when absent or empty), or the others if ``exclude``."""
    axes = attr_axes(node)
    chosen = set(range(ndim)) if not axes else {normalize_axis(a, ndim) for a in axes}
    if attr_bool(node, "exclude"):
        chosen = set(range(ndim)) - chosen
    return sorted(chosen)


def _keep_one_dim(result, ndim_reduced_to):
    """MXNet's legacy ops return shape (1,), never a 0-d scalar."""
    return R.reshape(result, (1,)) if ndim_reduced_to == 0 else result


def _reduction_converter(relax_op):
    def convert(ctx, node, args):
        """MXNet sum/mean/max/min/prod(axis, keepdims, exclude)."""
        x = args[0]
        axes = _reduced_axes(node, ndim_of(x))
        keepdims = attr_bool(node, "keepdims")
        if not axes:  # exclude=True naming every axis reduces nothing
            return x
        result = ctx.emit(relax_op(x, axes, keepdims))
        return _keep_one_dim(result, ndim_of(result))
    return convert


for _name, _op in _REDUCTIONS.items():
    register(_name)(_reduction_converter(_op))


def _arg_converter(relax_op):
    def convert(ctx, node, args):
        """MXNet argmax/argmin(axis=None, keepdims): indices as floats of the input dtype."""
        x = args[0]
        axis = attr_int(node, "axis")
        keepdims = attr_bool(node, "keepdims")
        indices = ctx.emit(relax_op(x, None if axis is None else normalize_axis(axis, ndim_of(x)),
                                    keepdims))
        return _keep_one_dim(ctx.emit(R.astype(indices, dtype_of(x))), ndim_of(indices))
    return convert


register("argmax")(_arg_converter(R.argmax))
register("argmin")(_arg_converter(R.argmin))
