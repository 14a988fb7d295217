"""Python's operators on np symbols (MXNet's numpy interface) in converted code.

They mean what they mean for the np arrays the symbols stand for: numpy's dtype
promotion and broadcasting, booleans from comparisons. Operands that are legacy
symbols there (a graph loop's counter, a number a graph loop carries), sizes read
from shapes (export) or arrays made outside converted code (captured as graph
inputs) join as np symbols. The np symbol lacks the operators
an np array has beyond its own (`@`, `&`, `|`, `^`): they are the np functions.
"""
import operator

import mxnet as mx

from ...capturing import tracing
from ...capturing.numpy_interface import as_numpy, is_numpy_symbol
from ...capturing.symbolic_shapes import SymbolicDim
from .values import is_int_like, is_symbol

_PYTHON = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
           "//": operator.floordiv, "%": operator.mod, "**": operator.pow,
           "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
           "==": operator.eq, "!=": operator.ne, "<<": operator.lshift, ">>": operator.rshift}
_FUNCTIONS = {"@": mx.sym.np.matmul, "&": mx.sym.np.bitwise_and, "|": mx.sym.np.bitwise_or,
              "^": mx.sym.np.bitwise_xor}
_INTEGER_RESULTS = ("+", "-", "*", "//", "%")


def applies(left, right):
    """Whether `left <op> right` has an np symbol operand."""
    return is_numpy_symbol(left) or is_numpy_symbol(right)


def binary_op(left, right, name):
    operands = [_operand(value) for value in (left, right)]
    function = _FUNCTIONS.get(name) or _PYTHON[name]
    result = function(*operands)
    if is_symbol(result) and name in _INTEGER_RESULTS and is_int_like(left) and \
            is_int_like(right):
        tracing.scalar_index(result)
    return result


def _operand(value):
    if isinstance(value, SymbolicDim):
        value = value.graph_value()
    elif isinstance(value, mx.nd.NDArray):   # made outside converted code: a graph input
        value = tracing.current().capture(value)
    return as_numpy(value) if is_symbol(value) else value


def not_(value):
    return mx.sym.np.logical_not(value)


def and_(left, right):
    """`left and right` elementwise: both true (nonzero)."""
    return mx.sym.np.bitwise_and(_truth(left), _truth(right))


def or_(left, right):
    return mx.sym.np.bitwise_or(_truth(left), _truth(right))


def _truth(value):
    if is_symbol(value):
        return mx.sym.np.not_equal(_operand(value), 0)
    return bool(value)
