"""Binary operators and augmented assignment in converted code.

Between two Symbols they broadcast (MXNet's Symbol operators do not, and Python
numbers a graph loop changes are one-element tensors there); otherwise they are
Python's operators, in-place ones included. A size read from a shape (export's
SymbolicDim) meeting a Symbol is its graph value; `//` on Symbols, which MXNet's
Symbol lacks, is the floor of the quotient. Integer arithmetic on values standing
for ints (values.is_int_like) stands for an int too: `seq[t + 1]` is a row.
"""
import operator

import mxnet as mx
import numpy as np

from ...capturing import effects, host_values, tracing
from . import numpy_operators
from ...capturing.symbolic_shapes import SymbolicDim
from .values import NUMBERS, as_tensor, is_int_like, is_number_like, is_symbol

_PYTHON = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
           "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "@": operator.matmul,
           "&": operator.and_, "|": operator.or_, "^": operator.xor, "<<": operator.lshift,
           ">>": operator.rshift, "<": operator.lt, "<=": operator.le, ">": operator.gt,
           ">=": operator.ge, "==": operator.eq, "!=": operator.ne}
_IN_PLACE = {"+": operator.iadd, "-": operator.isub, "*": operator.imul, "/": operator.itruediv,
             "//": operator.ifloordiv, "%": operator.imod, "**": operator.ipow,
             "@": operator.imatmul, "&": operator.iand, "|": operator.ior, "^": operator.ixor,
             "<<": operator.ilshift, ">>": operator.irshift}
_INTEGER_RESULTS = ("+", "-", "*", "//", "%")


def binary_op(left, right, name):
    if host_values.involved(left, right):   # a number read from a tensor, kept in the graph
        return host_values.binary_op(left, right, name)
    if numpy_operators.applies(left, right):
        return numpy_operators.binary_op(left, right, name)
    trace = tracing.current()
    if trace is not None and trace.ndarray_code and (is_symbol(left) or is_symbol(right)):
        # An array made outside the graph (`nd.array([...])` of Python values, a
        # constant) meets a traced value: it becomes a graph input, as in calls.py.
        left, right = [trace.capture(v) if isinstance(v, mx.nd.NDArray) else v
                       for v in (left, right)]
    if is_symbol(left) or is_symbol(right):
        # Symbol's own operators take neither sizes read from shapes nor `//`.
        convert = (SymbolicDim,) + (NUMBERS if name == "//" else ())
        left, right = [as_tensor(v) if isinstance(v, convert) else v for v in (left, right)]
    if name in host_values.BROADCASTING and is_symbol(left) and is_symbol(right):
        left, right = _number_in_the_arrays_dtype(left, right)
        result = host_values.BROADCASTING[name](left, right)
    else:
        result = _PYTHON[name](left, right)
    if is_symbol(result) and name in _INTEGER_RESULTS and is_int_like(left) and \
            is_int_like(right):
        tracing.scalar_index(result)
    elif is_symbol(result) and is_number_like(left) and is_number_like(right):
        tracing.scalar_float(result)
    return result


def _number_in_the_arrays_dtype(left, right):
    """(left, right), the one standing for a Python number (a float32 tensor: a
    counter or a float a graph loop or branch carries) cast to the other's dtype
    where MXNet infers one other than float32, as the number takes the array's dtype
    imperatively: MXNet's operators take one dtype, and a float64 model's
    `while n < steps.sum()` failed its type check."""
    left_is_number = is_number_like(left)
    if left_is_number == is_number_like(right):
        return left, right
    number, array = (left, right) if left_is_number else (right, left)
    dtype = tracing.current().inferred_dtype(array)
    if dtype is None or np.dtype(dtype) == np.float32:
        return left, right
    number = mx.sym.cast(number, dtype=np.dtype(dtype).name)
    return (number, right) if left_is_number else (left, number)


def augmented_assign(target, value, name):
    """`target op= value`: rebinding for Symbols, which have no in-place form."""
    if is_symbol(target):
        return binary_op(target, value, name)
    if isinstance(target, list) and name == "+":
        effects.note_append(target)     # `acc += [h]` appends, as acc.extend([h])
    return _IN_PLACE[name](target, value)
