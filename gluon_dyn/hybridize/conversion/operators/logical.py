"""`and`, `or`, `not` in converted code: elementwise on tensors, Python otherwise."""
import mxnet as mx
from malt.operators import logical as python_logical

from ...capturing import effects
from ...capturing.numpy_interface import is_numpy_symbol
from . import numpy_operators
from .values import is_symbol


def not_(a):
    effects.refuse_markers(a, "tested for truth")
    if is_numpy_symbol(a):
        return numpy_operators.not_(a)
    return mx.sym.logical_not(a) if is_symbol(a) else python_logical.not_(a)


def and_(a, b):
    left = a()
    effects.refuse_markers(left, "tested for truth")
    if not is_symbol(left):
        return left and b()
    right = b()
    if numpy_operators.applies(left, right):
        return numpy_operators.and_(left, right)
    return mx.sym.broadcast_logical_and(left, _as_truth_tensor(right))


def or_(a, b):
    left = a()
    effects.refuse_markers(left, "tested for truth")
    if not is_symbol(left):
        return left or b()
    right = b()
    if numpy_operators.applies(left, right):
        return numpy_operators.or_(left, right)
    return mx.sym.broadcast_logical_or(left, _as_truth_tensor(right))


def _as_truth_tensor(value):
    # `tensor and flag`: a Python operand (a `break` flag not yet a tensor) joins
    # the tensor one as 0/1.
    return value if is_symbol(value) else mx.sym.full(shape=(1,), val=float(bool(value)))
