"""Shapes and dtypes of Relax values, as converters need them."""
from tvm import tirx


def shape_of(expr):
    """The dims of a Relax tensor value: ints where static, PrimExprs otherwise."""
    shape = expr.ty.shape
    if shape is None:
        raise ValueError("value %s has no known shape" % expr)
    return [int(d) if isinstance(d, tirx.IntImm) else d for d in shape.values]


def ndim_of(expr):
    return expr.ty.ndim


def dtype_of(expr):
    """The dtype name, e.g. "float32" (Relax 0.27 holds a PrimType there)."""
    return str(expr.ty.dtype)


def normalize_axis(axis, ndim):
    """A possibly negative axis as a non-negative one (ValueError if out of range)."""
    if not -ndim <= axis < ndim:
        raise ValueError("axis %d out of range for a %d-d tensor" % (axis, ndim))
    return axis % ndim


def product(dims):
    result = 1
    for d in dims:
        result = result * d
    return result
