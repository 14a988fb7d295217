"""Python builtins that count or iterate a tensor, in code written for NDArrays.

An NDArray's `len()` is its number of rows and iterating it yields its rows; a
Symbol's `len()` counts its outputs and iterating it yields them, so traced as
they are, `range(len(seq))` would run once and `enumerate(seq)` would number the
whole sequence as one row. In a Block's forward these builtins, given a Symbol
with one output, mean what they mean for the NDArray it stands for:

- where the trace knows the length (a graph specialised to its input shapes),
  the Symbol is its list of rows and `len` its length, as for `for x in seq`;
- where the graph computes the length when it runs (export, or a shape after a
  graph branch), `len` is a SymbolicDim and `enumerate`, `zip` and `reversed`
  are loops.TensorRows, which a `for` runs as a graph loop; the builtins that
  would need the rows as a Python list stop the trace naming the line.

Python's own unpacking (`a, b = seq`, `f(*seq)`, `[*seq]`) takes the rows the same
way (`unpacked`), in a HybridBlock's code too.

A Symbol with several outputs (`mx.sym.split`, as `mx.nd.split` returns a list)
keeps Symbol's meaning, and so does code written for Symbols (hybrid_forward).
"""
from ....origin import user_location
from ...capturing import tracing
from ...capturing.numpy_interface import is_numpy_symbol
from .loops import TensorRows, known_length
from .subscripts import get_item, ndarray_item
from .values import is_symbol

_ITERATING = (enumerate, zip, reversed, list, tuple, iter, map, filter, sorted, sum, min, max,
              any, all)
_AS_GRAPH_LOOP = (enumerate, zip, reversed)
HANDLED = frozenset(id(f) for f in (len,) + _ITERATING)


def applies(f, args, trace):
    """Whether `f(*args)` counts or iterates a Symbol standing for an NDArray."""
    return id(f) in HANDLED and trace.ndarray_code and any(_is_array(a) for a in args)


def call(f, args, kwargs):
    """`f(*args, **kwargs)` with each single-output Symbol among `args` counted or
    iterated by its rows."""
    lengths = [known_length(a) if _is_array(a) else None for a in args]
    if all(length is not None for a, length in zip(args, lengths) if _is_array(a)):
        if f is len:
            return lengths[0]
        rows = [[get_item(a, i) for i in range(length)] if length is not None else a
                for a, length in zip(args, lengths)]
        return f(*rows, **(kwargs or {}))
    if f is len:
        return tracing.current().shape_of(args[0])[0]
    if f in _AS_GRAPH_LOOP and all(_is_array(a) for a in args[:1 if f is enumerate else None]):
        return _graph_rows(f, args, kwargs or {})
    raise tracing.FallbackRequired(
        "%s() of a tensor needs its rows as Python values, but their number is computed by the "
        "graph when it runs; a graph loop takes `for` over tensors, enumerate() and reversed() of "
        "one, zip() of several" % f.__name__, user_location())


def unpacked(value):
    """`value` where Python unpacks it (`a, b = value`, `f(*value)`, `[*value]`:
    converters/unpacking.py): a Symbol of one output is the list of its rows, as an
    NDArray unpacks (in a HybridBlock's code too: run imperatively, it unpacks
    NDArrays); anything else is itself."""
    if tracing.current() is None or not _is_array(value):
        return value
    length = known_length(value)
    if length is None:
        return call(list, (value,), None)   # says why the rows cannot be had
    if is_numpy_symbol(value):
        return [get_item(value, i) for i in range(length)]
    return [ndarray_item(value, i) for i in range(length)]


def _graph_rows(f, args, kwargs):
    if f is enumerate:
        start = kwargs.get("start", args[1] if len(args) > 1 else 0)
        return TensorRows(args[:1], number_from=start, description="enumerate()")
    if f is reversed:
        return TensorRows(args, reverse=True, description="reversed()")
    if kwargs:
        raise tracing.FallbackRequired("zip() of tensors takes no keyword arguments in a graph",
                                       user_location())
    return TensorRows(args, description="zip()")


def _is_array(value):
    return is_symbol(value) and len(value.list_outputs()) == 1
