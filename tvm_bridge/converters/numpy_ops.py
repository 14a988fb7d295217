"""The operators of MXNet's numpy interface (`_npi_*`, `_np_*`, `_npx_*`), with numpy's
meaning: comparisons give booleans, a reduction over every axis gives shape (),
`np.dot` is numpy's dot, `npx.reshape` has its own codes. (Layers in np mode call
the operators legacy MXNet has too: FullyConnected, Embedding, Convolution, softmax
convert as registered elsewhere.)

Mixed dtypes are promoted as MXNet's np operators promote them where that is
plain (an int or bool operand joins a float one; a bool one joins an int one);
other mixes, and ints where numpy's result would be a float, are left to MXNet.
"""
from tvm import relax
from tvm.relax import op as R

from .attrs import attr_axes, attr_bool, attr_float, attr_int, attr_str, attr_tuple
from .creation import filled
from .registry import Unsupported, register
from .tensor_info import dtype_of, ndim_of, normalize_axis, shape_of


def _is_float(dtype):
    return dtype.startswith(("float", "bfloat"))


def _promoted(a, b):
    """(a, b) cast to the dtype MXNet's np binary operators compute in."""
    left, right = dtype_of(a), dtype_of(b)
    if left == right:
        return a, b
    for (x, x_type), (y, y_type) in (((a, left), (b, right)), ((b, right), (a, left))):
        if (_is_float(x_type) and not _is_float(y_type)) or (y_type == "bool" and x_type != "bool"):
            cast = R.astype(y, x_type)
            return (x, cast) if x is a else (cast, x)
    raise Unsupported("operands of dtypes %s and %s" % (left, right))


def _float_only(x, what):
    if not _is_float(dtype_of(x)):
        raise Unsupported("%s of a %s array (numpy's result is a float)" % (what, dtype_of(x)))
    return x


def _scalar(node, like, compares):
    """The node's `scalar` attribute as a constant joining `like` (np scalar ops); a
    boolean array is compared with 0 or 1 as False or True."""
    value, dtype = attr_float(node, "scalar"), dtype_of(like)
    if value is None:
        raise ValueError("%s %r has no 'scalar' attribute" % (node.op, node.name))
    if _is_float(dtype):
        return relax.const(value, dtype)
    if dtype == "bool":
        if compares and value in (0.0, 1.0):
            return relax.const(int(value), _COMPARED_BOOLEANS)
    elif attr_bool(node, "is_int", True) and value == int(value):
        return relax.const(int(value), dtype)
    raise Unsupported("a %s array with the scalar %r" % (dtype, value))


# Binary arithmetic: `_npi_<name>` (two arrays, broadcast) and `_npi_<name>_scalar`,
# `_npi_r<name>_scalar` (the scalar on the left).
_ARITHMETIC = {"add": R.add, "subtract": R.subtract, "multiply": R.multiply,
               "true_divide": R.divide, "power": R.power}
_COMPARISONS = {"equal": R.equal, "not_equal": R.not_equal, "greater": R.greater,
                "greater_equal": R.greater_equal, "less": R.less, "less_equal": R.less_equal}


# TVM 0.27 compiles a comparison of booleans into an invalid LLVM float compare:
# booleans are compared as these.
_COMPARED_BOOLEANS = "int8"


def _comparable(x, compares):
    return R.astype(x, _COMPARED_BOOLEANS) if compares and dtype_of(x) == "bool" else x


def _binary(relax_op, divides):
    def convert(ctx, node, args):
        """An np binary operator: numpy broadcasting, MXNet's dtype promotion."""
        a, b = _promoted(*args)
        if divides:
            _float_only(a, "true division")
        compares = relax_op in _COMPARISONS.values()
        return relax_op(_comparable(a, compares), _comparable(b, compares))
    return convert


def _with_scalar(relax_op, scalar_on_left, divides):
    def convert(ctx, node, args):
        """An np operator between an array and the node's `scalar`."""
        x = args[0]
        if divides:
            _float_only(x, "true division")
        compares = relax_op in _COMPARISONS.values()
        scalar = _scalar(node, x, compares)
        x = _comparable(x, compares)
        return relax_op(scalar, x) if scalar_on_left else relax_op(x, scalar)
    return convert


for _name, _op in _ARITHMETIC.items():
    _divides = _name == "true_divide"
    register("_npi_" + _name)(_binary(_op, _divides))
    register("_npi_%s_scalar" % _name)(_with_scalar(_op, False, _divides))
    if _name in ("subtract", "true_divide", "power"):
        register("_npi_r%s_scalar" % _name)(_with_scalar(_op, True, _divides))
for _name, _op in _COMPARISONS.items():   # booleans, as numpy's comparisons give
    register("_npi_" + _name)(_binary(_op, False))
    register("_npi_%s_scalar" % _name)(_with_scalar(_op, False, False))


def _boolean(relax_op):
    def convert(ctx, node, args):
        """np bitwise and/or/xor of booleans: their logical counterparts."""
        if any(dtype_of(arg) != "bool" for arg in args):
            raise Unsupported("bitwise operators on non-boolean arrays")
        return relax_op(*args)
    return convert


register("_npi_bitwise_and")(_boolean(R.logical_and))
register("_npi_bitwise_or")(_boolean(R.logical_or))
register("_npi_bitwise_xor")(_boolean(R.logical_xor))


@register("_npi_logical_not")
def convert_logical_not(ctx, node, args):
    """np logical_not: True where the input is zero (False)."""
    x = args[0]
    if dtype_of(x) == "bool":
        return R.logical_not(x)
    return R.equal(x, relax.const(0, dtype_of(x)))


_UNARY = {"_npi_exp": R.exp, "_npi_log": R.log, "_npi_sqrt": R.sqrt, "_npi_tanh": R.tanh,
          "_npi_sin": R.sin, "_npi_cos": R.cos, "_npx_sigmoid": R.sigmoid,
          "_npi_reciprocal": lambda x: R.divide(relax.const(1.0, dtype_of(x)), x)}
_SAME_DTYPE_UNARY = {"_npi_absolute": R.abs, "_npi_negative": R.negative,
                     "_npi_square": R.square, "_npx_relu": R.nn.relu, "_np_copy": lambda x: x}


def _unary(relax_op, floats_only):
    def convert(ctx, node, args):
        """An np unary operator, elementwise."""
        return relax_op(_float_only(args[0], node.op) if floats_only else args[0])
    return convert


for _name, _op in _UNARY.items():
    register(_name)(_unary(_op, True))
for _name, _op in _SAME_DTYPE_UNARY.items():
    register(_name)(_unary(_op, False))


# Reductions: `axis` None reduces every axis, to shape () unless keepdims.
_REDUCTIONS = {"_np_sum": R.sum, "_npi_mean": R.mean, "_np_max": R.max, "_np_min": R.min,
               "_np_prod": R.prod}


def _reduction(relax_op, name):
    def convert(ctx, node, args):
        """An np reduction(axis, keepdims); dtype and initial left to MXNet."""
        x = args[0]
        if attr_str(node, "initial") is not None:
            raise Unsupported("initial=")
        dtype = attr_str(node, "dtype")
        if (dtype is not None and dtype != dtype_of(x)) or \
                (name in ("_np_sum", "_npi_mean", "_np_prod") and not _is_float(dtype_of(x))):
            raise Unsupported("a %s of a %s array (other result dtype)" % (name, dtype_of(x)))
        axes = attr_axes(node)
        axes = None if axes is None else [normalize_axis(a, ndim_of(x)) for a in axes]
        return relax_op(x, axes, attr_bool(node, "keepdims"))
    return convert


for _name, _op in _REDUCTIONS.items():
    register(_name)(_reduction(_op, _name))


@register("_npi_argmax", "_npi_argmin")
def convert_argmax(ctx, node, args):
    """np argmax/argmin(axis, keepdims): int64 indices."""
    relax_op = R.argmax if node.op == "_npi_argmax" else R.argmin
    x, axis = args[0], attr_int(node, "axis")
    indices = relax_op(x, None if axis is None else normalize_axis(axis, ndim_of(x)),
                       attr_bool(node, "keepdims"))
    return R.astype(ctx.emit(indices), "int64")


@register("_np_dot")
def convert_np_dot(ctx, node, args):
    """np.dot: vectors give their inner product (shape ()), 2-D and N-D arrays with a
    matrix or a vector the matrix product (over a's last axis and b's first)."""
    a, b = _promoted(*args)
    if ndim_of(a) == 1 and ndim_of(b) == 1:
        return R.sum(ctx.emit(R.multiply(a, b)), None, False)
    if ndim_of(a) >= 1 and ndim_of(b) in (1, 2):
        return R.matmul(a, b)
    raise Unsupported("np.dot of a %d-d and a %d-d array" % (ndim_of(a), ndim_of(b)))


@register("_npi_matmul")
def convert_np_matmul(ctx, node, args):
    """np.matmul: matrix products, broadcast over leading axes."""
    return R.matmul(*_promoted(*args))


@register("_np_transpose")
def convert_np_transpose(ctx, node, args):
    """np.transpose(axes): None reverses the axes."""
    axes = attr_tuple(node, "axes")
    if axes is not None and len(axes) and axes[0] is not None:
        axes = [int(a) for a in axes]
    else:
        axes = None
    return R.permute_dims(args[0], axes)


@register("_np_reshape")
def convert_np_reshape(ctx, node, args):
    """np.reshape(newshape) in C order; one dim may be -1."""
    if attr_str(node, "order", "C") != "C":
        raise Unsupported("order=%s" % attr_str(node, "order"))
    return R.reshape(args[0], [int(d) for d in attr_tuple(node, "newshape")])


def numpy_reshape_dims(dims, codes):
    """The output dims of npx.reshape: -1 infers one dim, -2 copies a dim, -3 drops a
    dim of size 1, -4 copies the remaining dims, -5 merges two dims, -6 splits a dim
    into the next two codes (one may be -1); other codes are sizes, taking a dim."""
    out, source, j = [], 0, 0
    while j < len(codes):
        code = codes[j]
        if code == -2:
            out.append(dims[source])
        elif code == -3:
            if not (isinstance(dims[source], int) and dims[source] == 1):
                raise Unsupported("npx.reshape code -3 on a dim of size %s" % (dims[source],))
        elif code == -4:
            out.extend(dims[source:])
            source = len(dims)
            j += 1
            continue
        elif code == -5:
            out.append(dims[source] * dims[source + 1])
            source += 1
        elif code == -6:
            first, second = codes[j + 1], codes[j + 2]
            if first == -1:
                first = dims[source] // second
            elif second == -1:
                second = dims[source] // first
            out.extend([first, second])
            j += 2
        elif code < -6:
            raise Unsupported("npx.reshape code %d" % code)
        else:
            out.append(code)
        source += 1
        j += 1
    return out


@register("_npx_reshape")
def convert_npx_reshape(ctx, node, args):
    """npx.reshape(newshape) with its special codes (reverse=False)."""
    if attr_bool(node, "reverse"):
        raise Unsupported("reverse=True")
    codes = [int(c) for c in attr_tuple(node, "newshape")]
    return R.reshape(args[0], numpy_reshape_dims(shape_of(args[0]), codes))


@register("_npi_concatenate")
def convert_np_concatenate(ctx, node, args):
    """np.concatenate(axis): joins along an existing axis (None flattens first)."""
    if node.attrs.get("axis") == "None":
        raise Unsupported("axis=None")
    return R.concat(list(args), axis=attr_int(node, "axis", 0))


@register("_npi_stack")
def convert_np_stack(ctx, node, args):
    """np.stack(axis): joins along a new axis."""
    return R.stack(list(args), axis=attr_int(node, "axis", 0))


@register("_npi_broadcast_to")
def convert_np_broadcast_to(ctx, node, args):
    """np.broadcast_to(shape)."""
    return R.broadcast_to(args[0], [int(d) for d in attr_tuple(node, "shape")])


@register("_npi_where")
def convert_np_where(ctx, node, args):
    """np.where(condition, x, y): x where condition is true (nonzero)."""
    condition, x, y = args
    if dtype_of(condition) != "bool":
        condition = ctx.emit(R.not_equal(condition, relax.const(0, dtype_of(condition))))
    return R.where(condition, *_promoted(x, y))


@register("_npi_zeros")
def convert_np_zeros(ctx, node, args):
    """np.zeros(shape, dtype)."""
    return filled(node, 0, zero_is_unknown=False)


@register("_npi_ones")
def convert_np_ones(ctx, node, args):
    """np.ones(shape, dtype)."""
    return filled(node, 1, zero_is_unknown=False)


@register("_npi_full_like")
def convert_np_full_like(ctx, node, args):
    """np.full_like(a, fill_value, dtype) (zeros_like and ones_like too)."""
    dtype = attr_str(node, "dtype") or dtype_of(args[0])
    return R.full(shape_of(args[0]), relax.const(attr_float(node, "fill_value"), dtype), dtype)


