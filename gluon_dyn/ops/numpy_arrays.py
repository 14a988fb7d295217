"""MXNet's numpy interface at the control-flow operators' boundary.

In np mode (`npx.set_np()`) arrays are `mx.np.ndarray`s and symbols
`mx.sym.np._Symbol`s, which legacy operators reject, and np predicates are
booleans, which MXNet's `_cond` cannot take. The operators run on legacy views of
what they are given (`as_nd_ndarray`: the same memory or graph node, the same
autograd history, no copy and no node added): an np predicate as its truth (0/1
float32, one element), np loop variables, data and states as legacy views. The
functions they call get np views of their arguments where the caller gave np
arrays, and what those functions return (np or legacy) is what the operator
returns, each array of the kind the function gave.
"""
import mxnet as mx
from mxnet.symbol.numpy import _Symbol as NumpySymbol

_NUMPY = (mx.np.ndarray, NumpySymbol)


def is_numpy(value):
    """An np array or an np symbol."""
    return isinstance(value, _NUMPY)


def holds_numpy(value):
    """Whether `value`, or anything in it (lists and tuples), is an np array or symbol."""
    if isinstance(value, (list, tuple)):
        return any(holds_numpy(item) for item in value)
    return is_numpy(value)


def as_legacy(value):
    """`value` with every np array or symbol in it (nested in lists and tuples) as a
    legacy view of it."""
    if is_numpy(value):
        return value.as_nd_ndarray()
    return _rebuilt(value, as_legacy) if holds_numpy(value) else value


def as_numpy(value):
    """`value` with every array or symbol in it (nested in lists and tuples) as an np
    view of it."""
    if isinstance(value, (mx.nd.NDArray, mx.sym.Symbol)):
        return value.as_np_ndarray()
    return _rebuilt(value, as_numpy) if isinstance(value, (list, tuple)) else value


def _rebuilt(value, convert):
    items = [convert(item) for item in value]
    return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)


def truth(value):
    """A predicate as the operators take it: an np symbol (a boolean) as its truth,
    0/1 float32 of one element in a legacy symbol; an np array as a legacy view; a
    legacy array or symbol as it is. (A predicate of more elements fails when the
    graph runs, as `bool()` of its array does.) No gradient flows through a truth:
    MXNet 1.9.1's _while_loop backward fails ("in_attrs->size() ==
    bwd_input_eid.size()") on a loop whose carried predicate is an np comparison."""
    if isinstance(value, NumpySymbol):
        flag = mx.sym.BlockGrad(mx.sym.np.not_equal(value, 0).as_nd_ndarray())
        return mx.sym.reshape(mx.sym.cast(flag, dtype="float32"), shape=(1,))
    return value.as_nd_ndarray() if isinstance(value, mx.np.ndarray) else value


def kinds(value):
    """Where `value` holds np arrays or symbols: True, False or None per leaf, in its
    structure (see restored)."""
    if isinstance(value, (list, tuple)):
        return [kinds(item) for item in value]
    return is_numpy(value)


def restored(value, template):
    """`value` (legacy) with np views where `template` (from kinds(), of a value of the
    same structure) has True."""
    if template is True:
        return as_numpy(value)
    if isinstance(template, list) and isinstance(value, (list, tuple)) and \
            len(template) == len(value):
        return _rebuilt_with(value, [restored(item, kind) for item, kind in zip(value, template)])
    return value


def _rebuilt_with(value, items):
    return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)


class Returned:
    """Wraps a function an operator calls: what it returns, as legacy views, and the
    kinds (np or not) it returned, to give the operator's results back as such."""

    def __init__(self, function):
        self.function, self.kinds = function, None

    def __call__(self, *args):
        result = self.function(*args)
        self.kinds = kinds(result)
        return as_legacy(result)
