"""`and`, `or`, `not` in converted code: elementwise on tensors, Python otherwise."""
import mxnet as mx
from malt.operators import logical as python_logical

from .control_flow import is_symbol


def not_(a):
    return mx.sym.logical_not(a) if is_symbol(a) else python_logical.not_(a)


def and_(a, b):
    left = a()
    if not is_symbol(left):
        return left and b()
    return mx.sym.broadcast_logical_and(left, b())


def or_(a, b):
    left = a()
    if not is_symbol(left):
        return left or b()
    return mx.sym.broadcast_logical_or(left, b())
