"""Augmented assignment in converted code (see converters/augmented_assignment.py)."""
import operator

from .control_flow import is_symbol

_IN_PLACE = {"+": operator.iadd, "-": operator.isub, "*": operator.imul, "/": operator.itruediv,
             "//": operator.ifloordiv, "%": operator.imod, "**": operator.ipow,
             "@": operator.imatmul, "&": operator.iand, "|": operator.ior, "^": operator.ixor,
             "<<": operator.ilshift, ">>": operator.irshift}
_REBINDING = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
              "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "@": operator.matmul,
              "&": operator.and_, "|": operator.or_, "^": operator.xor, "<<": operator.lshift,
              ">>": operator.rshift}


def augmented_assign(target, value, operator_name):
    """`target op= value`: rebinding for Symbols, which have no in-place form."""
    if is_symbol(target):
        return _REBINDING[operator_name](target, value)
    return _IN_PLACE[operator_name](target, value)
