"""Nested structures of arrays: flattening, regrouping, and up-front checks.

The control-flow operators accept an array or arbitrarily nested lists/tuples of
arrays wherever MXNet's do. Everything here raises errors that name the operator,
the argument and the position of the offending element, so a mistake in a loop
body is reported as such rather than as a failure deep inside MXNet.
"""
import functools

import mxnet as mx

from ..origin import user_location

LEAF = None  # the format of a single array


class ControlFlowError(ValueError):
    """A control-flow operator was given, or its functions returned, something it cannot use."""


def located(op):
    """Decorates a public operator: its ControlFlowErrors name the user's file:line
    ("cond at model.py:12: pred must be ..."). The innermost operator of a nest
    names its call; outer ones leave the message alone."""
    prefix = op.__name__ + ": "

    @functools.wraps(op)
    def operator(*args, **kwargs):
        try:
            return op(*args, **kwargs)
        except ControlFlowError as error:
            message = str(error)
            if not getattr(error, "located", False) and message.startswith(prefix):
                error.args = ("%s at %s: %s" % (op.__name__, user_location(),
                                                message[len(prefix):]),)
            error.located = True
            raise
    return operator


def array_kind(value):
    """'ndarray', 'symbol', or None for anything else."""
    if isinstance(value, mx.nd.NDArray):
        return "ndarray"
    if isinstance(value, mx.sym.Symbol):
        return "symbol"
    return None


def describe(value):
    """A short description of a value for error messages."""
    kind = array_kind(value)
    if kind == "ndarray":
        return "NDArray of shape %s and dtype %s" % (value.shape, dtype_name(value))
    if kind == "symbol":
        return "Symbol %r" % value.name
    if isinstance(value, (int, float, bool, str)):
        return "%s %r" % (type(value).__name__, value)
    return type(value).__name__


def dtype_name(array):
    return getattr(array.dtype, "__name__", str(array.dtype))


def flatten(value, op, what):
    """Flatten `value` into a list of arrays and a format that `regroup` inverts.

    None and empty lists are allowed (an empty structure). Anything that is not an
    array or a list/tuple of them raises ControlFlowError naming `op`, `what` and
    the element's index path.
    """
    flat = []

    def visit(item, path):
        if array_kind(item) is not None:
            flat.append(item)
            return LEAF
        if isinstance(item, (list, tuple)):
            return [visit(sub, path + [i]) for i, sub in enumerate(item)]
        where = "".join("[%d]" % i for i in path)
        raise ControlFlowError("%s: %s%s must be an NDArray, a Symbol or a (nested) list of them, got %s"
                               % (op, what, where, describe(item)))

    fmt = [] if value is None else visit(value, [])
    return flat, fmt


def regroup(flat, fmt):
    """Inverse of `flatten`: rebuild the nested structure described by `fmt`."""
    position = iter(flat)

    def build(spec):
        if spec is LEAF:
            return next(position)
        return [build(sub) for sub in spec]

    return build(fmt)


def common_kind(values, op):
    """The array kind ('ndarray' or 'symbol') shared by all `values`; mixing is an error."""
    kinds = {array_kind(v) for v in values}
    if len(kinds) > 1:
        raise ControlFlowError("%s: inputs mix NDArrays and Symbols; use NDArrays imperatively "
                               "or Symbols inside hybrid_forward, not both" % op)
    return kinds.pop() if kinds else None


def check_callable(fn, op, what):
    if not callable(fn):
        raise TypeError("%s: %s must be callable, got %s" % (op, what, describe(fn)))


def check_name(name, op):
    """MXNet's `name=` keyword: a non-empty str that prefixes the subgraphs' names."""
    if not isinstance(name, str) or not name:
        raise TypeError("%s: name must be a non-empty str, got %s" % (op, describe(name)))


def unpack_body_result(result, op, fn_name):
    """Split a body's `(outputs, states)` return value, with a clear error otherwise."""
    if not isinstance(result, (list, tuple)) or len(result) != 2:
        raise ControlFlowError("%s: %s must return a pair (outputs, states), got %s"
                               % (op, fn_name, describe(result)))
    return result[0], result[1]
