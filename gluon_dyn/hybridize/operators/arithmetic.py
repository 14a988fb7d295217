"""Binary operators and augmented assignment in converted code.

Between two Symbols they broadcast (MXNet's Symbol operators do not, and Python
numbers a graph loop changes are one-element tensors there); otherwise they are
Python's operators, in-place ones included.
"""
import operator

import mxnet as mx

from .. import effects
from .values import is_symbol

_PYTHON = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
           "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "@": operator.matmul,
           "&": operator.and_, "|": operator.or_, "^": operator.xor, "<<": operator.lshift,
           ">>": operator.rshift, "<": operator.lt, "<=": operator.le, ">": operator.gt,
           ">=": operator.ge, "==": operator.eq, "!=": operator.ne}
_IN_PLACE = {"+": operator.iadd, "-": operator.isub, "*": operator.imul, "/": operator.itruediv,
             "//": operator.ifloordiv, "%": operator.imod, "**": operator.ipow,
             "@": operator.imatmul, "&": operator.iand, "|": operator.ior, "^": operator.ixor,
             "<<": operator.ilshift, ">>": operator.irshift}
_BROADCASTING = {"+": mx.sym.broadcast_add, "-": mx.sym.broadcast_sub, "*": mx.sym.broadcast_mul,
                 "/": mx.sym.broadcast_div, "%": mx.sym.broadcast_mod, "**": mx.sym.broadcast_power,
                 "<": mx.sym.broadcast_lesser, "<=": mx.sym.broadcast_lesser_equal,
                 ">": mx.sym.broadcast_greater, ">=": mx.sym.broadcast_greater_equal,
                 "==": mx.sym.broadcast_equal, "!=": mx.sym.broadcast_not_equal}


def binary_op(left, right, name):
    if name in _BROADCASTING and is_symbol(left) and is_symbol(right):
        return _BROADCASTING[name](left, right)
    return _PYTHON[name](left, right)


def augmented_assign(target, value, name):
    """`target op= value`: rebinding for Symbols, which have no in-place form."""
    if is_symbol(target):
        return binary_op(target, value, name)
    if isinstance(target, list) and name == "+":
        effects.note_append(target)     # `acc += [h]` appends, as acc.extend([h])
    return _IN_PLACE[name](target, value)
