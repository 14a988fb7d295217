"""Elementwise and broadcasting arithmetic, comparisons and unary math."""
from tvm import relax
from tvm.relax import op as R

from .attrs import attr_float
from .registry import register
from .tensor_info import dtype_of

# Binary ops by MXNet name stem: "elemwise_<stem>" (or "_<stem>") requires equal
# shapes, "broadcast_<stem>" broadcasts like numpy; Relax's ops broadcast, covering both.
_ELEMWISE_STEMS = {"add": R.add, "sub": R.subtract, "mul": R.multiply, "div": R.divide}
_UNDERSCORE_STEMS = {
    "power": R.power, "maximum": R.maximum, "minimum": R.minimum, "greater": R.greater,
    "greater_equal": R.greater_equal, "lesser": R.less, "lesser_equal": R.less_equal,
    "equal": R.equal, "not_equal": R.not_equal,
}
# MXNet comparisons return 0/1 in the input dtype, not booleans.
_COMPARISONS = (R.greater, R.greater_equal, R.less, R.less_equal, R.equal, R.not_equal)
# (relax op, scalar on the right?) for each "x <op> scalar" MXNet op.
_SCALAR = {
    "_plus_scalar": (R.add, True), "_minus_scalar": (R.subtract, True),
    "_rminus_scalar": (R.subtract, False), "_mul_scalar": (R.multiply, True),
    "_div_scalar": (R.divide, True), "_rdiv_scalar": (R.divide, False),
    "_power_scalar": (R.power, True), "_rpower_scalar": (R.power, False),
    "_maximum_scalar": (R.maximum, True), "_minimum_scalar": (R.minimum, True),
    "_greater_scalar": (R.greater, True), "_greater_equal_scalar": (R.greater_equal, True),
    "_lesser_scalar": (R.less, True), "_lesser_equal_scalar": (R.less_equal, True),
    "_equal_scalar": (R.equal, True), "_not_equal_scalar": (R.not_equal, True),
}
_UNARY = {
    "negative": R.negative, "exp": R.exp, "log": R.log, "sqrt": R.sqrt, "rsqrt": R.rsqrt,
    "square": R.square, "abs": R.abs, "sin": R.sin, "cos": R.cos, "floor": R.floor,
    "ceil": R.ceil, "sign": R.sign, "erf": R.erf,
}


def _scalar_const(node, like):
    """MXNet's ``scalar`` attribute as a constant of the tensor's dtype."""
    dtype = dtype_of(like)
    value = attr_float(node, "scalar")
    if value is None:
        raise ValueError("%s %r has no 'scalar' attribute" % (node.op, node.name))
    return relax.const(value if "float" in dtype else int(value), dtype)


def _apply(ctx, relax_op, lhs, rhs, dtype):
    """``relax_op(lhs, rhs)``; comparison masks become 0/1 of ``dtype`` as in MXNet."""
    if relax_op not in _COMPARISONS:
        return relax_op(lhs, rhs)
    return R.astype(ctx.emit(relax_op(lhs, rhs)), dtype)


def _binary_converter(relax_op):
    def convert(ctx, node, args):
        """MXNet elemwise_*/broadcast_* binary op or comparison: numpy broadcasting."""
        return _apply(ctx, relax_op, args[0], args[1], dtype_of(args[0]))
    return convert


def _scalar_converter(relax_op, scalar_on_right):
    def convert(ctx, node, args):
        """MXNet ``x <op> scalar`` (or ``scalar <op> x`` for the _r* forms)."""
        x, scalar = args[0], _scalar_const(node, args[0])
        lhs, rhs = (x, scalar) if scalar_on_right else (scalar, x)
        return _apply(ctx, relax_op, lhs, rhs, dtype_of(x))
    return convert


def _unary_converter(relax_op):
    def convert(ctx, node, args):
        """MXNet unary math op, elementwise."""
        return relax_op(args[0])
    return convert


for _stem, _op in _ELEMWISE_STEMS.items():
    register("elemwise_" + _stem, "broadcast_" + _stem)(_binary_converter(_op))
for _stem, _op in _UNDERSCORE_STEMS.items():
    register("_" + _stem, "broadcast_" + _stem)(_binary_converter(_op))
for _name, (_op, _right) in _SCALAR.items():
    register(_name)(_scalar_converter(_op, _right))
for _name, _op in _UNARY.items():
    register(_name)(_unary_converter(_op))


def _nonzero(x):
    return R.not_equal(x, relax.const(0, dtype_of(x)))


def _logical_converter(relax_op):
    def convert(ctx, node, args):
        """MXNet logical op: inputs read as nonzero/zero, result 1/0 of the first input's dtype."""
        return R.astype(relax_op(*[_nonzero(arg) for arg in args]), dtype_of(args[0]))
    return convert


for _op, _names in ((R.logical_and, ("_logical_and", "broadcast_logical_and")),
                    (R.logical_or, ("_logical_or", "broadcast_logical_or")),
                    (R.logical_xor, ("_logical_xor", "broadcast_logical_xor")),
                    (R.logical_not, ("logical_not",))):
    register(*_names)(_logical_converter(_op))


@register("add_n")  # ElementWiseSum is its alias
def convert_add_n(ctx, node, args):
    """MXNet add_n: the sum of all inputs (same shapes)."""
    total = args[0]
    for arg in args[1:]:
        total = ctx.emit(R.add(total, arg))
    return total
