"""Indexing in converted code: NDArray semantics for Symbols traced from NDArray code.

Outside a Block trace (a HybridBlock's hybrid_forward written for Symbols), and
on Symbols with several outputs, indexing keeps MXNet's Symbol meaning: select
an output.

Where imperative code indexes with a Python int, the traced code may hold a
one-element tensor standing for it (a graph loop's counter, an int a graph loop
or branch carries, a size read from a shape when exporting: values.is_int_like).
Such an index selects a row as the int does, dropping axis 0; any other tensor
index is an index array, whose axes stay (NDArray's advanced indexing).
"""
import mxnet as mx
import numpy as np

from ....origin import user_location
from ...capturing import effects, host_values, tracing
from ...capturing.numpy_interface import is_numpy_symbol
from . import aliases, item_assignment, numpy_subscripts
from ...capturing.symbolic_shapes import SymbolicDim
from .values import as_tensor, graph_constant, is_int_like, is_symbol, length_of


def get_item(target, key):
    if host_values.indexes(target, key):   # by a number read from a tensor, in the graph
        return host_values.get_item(target, key)
    trace = tracing.current()
    if not is_symbol(target) or trace is None or len(target.list_outputs()) > 1:
        effects.refuse_markers(target, "indexed")
        return target[key]
    if is_numpy_symbol(target):   # numpy's indexing (MXNet's numpy interface)
        return numpy_subscripts.get_item(target, key)
    key_parts = key if isinstance(key, tuple) else (key,)
    if not trace.ndarray_code:
        # hybrid_forward code: an int selects an output, as for any Symbol; slices
        # and index lists (which plain Symbols reject) take NDArray's meaning.
        if any(isinstance(part, _INDEX_LISTS) for part in key_parts):
            return ndarray_item(target, key)
        if not any(isinstance(part, slice) for part in key_parts):
            return target[key]
        return _slices_without_shape(target, key_parts)
    indexed = trace.indexed(target, key)   # by a number of a recursion's data (recursion/)
    if indexed is not None:
        return indexed
    return ndarray_item(target, key)


def ndarray_item(target, key):
    """NDArray's `target[key]`, `target` a legacy Symbol of one output, in a trace; a
    view of `target` where NDArray gives one (aliases.py)."""
    item = _array_item(target, key)
    shares = _is_view(target, key)
    if shares:
        aliases.note_view(item, target, lambda base: _array_item(base, key),
                          lambda base, value: item_assignment.updated_array(base, key, value),
                          shares)
    return item


def _array_item(target, key):
    """`target[key]` of NDArray code, `target` a legacy Symbol of one output."""
    if is_symbol(key) or isinstance(key, SymbolicDim):
        if is_int_like(key):
            return row_at(target, as_tensor(key))
        return mx.sym.take(target, key, axis=0)   # an index array: its axes stay
    key_parts = key if isinstance(key, tuple) else (key,)
    try:
        if isinstance(key, int):
            return _row(target, key)
        if any(isinstance(part, _INDEX_LISTS) for part in key_parts):
            return _advanced_item(target, key_parts, tuple(tracing.static_shape(target)))
        return _index_like_ndarray(target, key_parts)
    except AttributeError:  # a shape only known at run time (after a cond)
        if any(isinstance(part, _INDEX_LISTS) for part in key_parts):
            raise tracing.FallbackRequired(
                "indexing by a list of positions an array whose shape is known only when "
                "the graph runs", user_location()) from None
        return _slices_without_shape(target, key_parts)


# Key parts that make NDArray's indexing advanced when given as constants.
_INDEX_LISTS = (list, tuple, np.ndarray)


def _advanced_item(target, key, shape):
    """NDArray's advanced indexing by constant index lists (`x[0, [3, 3]]`, a copy):
    NDArray follows NumPy's rules, so NumPy indexing the positions of `target`'s
    elements gives the positions to take (and NumPy's IndexError where NDArray
    raises one)."""
    positions = np.arange(int(np.prod(shape))).reshape(shape)[key]
    taken = mx.sym.take(mx.sym.reshape(target, shape=(-1,)),
                        graph_constant(positions, np.int64))
    return mx.sym.reshape(taken, shape=positions.shape or (1,))


def _is_view(target, key):
    """Whether NDArray's `target[key]` shares `target`'s memory: basic indexing (ints,
    and values standing for ints, and slices) of a contiguous part; a function
    answering it where that depends on sizes not read yet (aliases.View)."""
    if is_symbol(key) or isinstance(key, SymbolicDim):
        return is_int_like(key)
    parts = key if isinstance(key, tuple) else (key,)
    if not all(isinstance(part, (int, slice)) and not isinstance(part, bool) for part in parts):
        return False
    try:
        ndim = tracing.rank(target)
        if len(parts) > ndim:
            return False
        parts += (slice(None),) * (ndim - len(parts))
        sized = [axis for axis, part in enumerate(parts) if not _whole(part)]
        sizes = dict(zip(sized, tracing.dims_of(target, sized)))
    except AttributeError:
        return False
    sliced, _ = mx.nd.NDArray._basic_indexing_key_int_to_slice(parts)

    def contiguous(shape):
        return mx.nd.NDArray._basic_indexing_slice_is_contiguous(sliced, shape)

    # A whole axis matters only by being of size 1 or not: where neither changes
    # the answer, the graph does not depend on those sizes; else they are read
    # only when an assignment asks (aliases.View).
    answers = {contiguous(tuple(sizes.get(axis, whole) for axis in range(ndim)))
               for whole in (1, 2)}
    if len(answers) == 1:
        return answers.pop()
    return lambda: contiguous(tuple(tracing.static_shape(target)))


def row_at(target, index):
    """`x[i]` for a one-element tensor `i` standing for an int, as an int indexes:
    a negative index counts from the end, one out of range is an error (take's
    "raise" mode, where the default "clip" would give another row), and axis 0 is
    dropped; a 1-D row stays (1,)."""
    if is_numpy_symbol(target):
        return numpy_subscripts.row_at(target, index)
    position = index + mx.sym.broadcast_mul(index < 0, length_of(target))
    # MXNet's squeeze keeps shape (1,) when every axis goes, as a legacy NDArray does.
    return mx.sym.squeeze(mx.sym.take(target, position, axis=0, mode="raise"), axis=0)


def _slices_without_shape(target, key):
    """`x[1:, 0, ::2]` from the key alone (no bounds check: the shape is unknown)."""
    begin, end, step, dropped = [], [], [], []
    for axis, index in enumerate(key):
        if isinstance(index, slice):
            # int(): a size read from a shape (export) cannot be a slice bound.
            begin.append(None if index.start is None else int(index.start))
            end.append(None if index.stop is None else int(index.stop))
            step.append(None if index.step is None else int(index.step))
        else:
            position = int(index)
            begin.append(position)
            end.append(position + 1 if position != -1 else None)
            step.append(None)
            dropped.append(axis)
    result = mx.sym.slice(target, begin=tuple(begin), end=tuple(end), step=tuple(step))
    # MXNet's squeeze keeps shape (1,) when every axis goes, as a legacy NDArray does.
    return mx.sym.squeeze(result, axis=tuple(dropped)) if dropped else result


def _row(target, index):
    """`x[i]`: reads only the length of axis 0, so the graph fits any other sizes."""
    ndim, (length,) = tracing.rank(target), tracing.dims_of(target, [0])
    position = index + length if index < 0 else index
    if not 0 <= position < length:
        raise IndexError("index %d is out of bounds for axis 0 with size %d" % (index, length))
    row = mx.sym.slice_axis(target, axis=0, begin=position, end=position + 1)
    # Dropping axis 0 (merge it into the next); a 1-D row stays (1,) as for NDArrays.
    return mx.sym.reshape(row, shape=(-3, -2)) if ndim > 1 else row


def _whole(index):
    """Whether a key part takes its whole axis as it is (`:`), whatever its size."""
    return isinstance(index, slice) and index == slice(None)


def _index_like_ndarray(target, key):
    """Basic indexing by ints and slices; reads only the sizes of the axes an int or
    a bounded slice indexes, so a graph taking an axis whole fits any size of it."""
    ndim = tracing.rank(target)
    if len(key) > ndim:
        raise IndexError("too many indices (%d) for an array of %d dimensions" % (len(key), ndim))
    sized = [axis for axis, index in enumerate(key) if not _whole(index)]
    sizes = dict(zip(sized, tracing.dims_of(target, sized)))
    begin, end, step, dropped = [], [], [], []
    for axis in range(ndim):
        index = key[axis] if axis < len(key) else slice(None)
        if axis not in sizes:
            begin.append(None)
            end.append(None)
            step.append(None)
        elif isinstance(index, slice):
            start, stop, stride = index.indices(sizes[axis])
            begin.append(start)
            end.append(stop if stop >= 0 or stride > 0 else None)
            step.append(stride)
        else:
            dim = sizes[axis]
            position = int(index) + dim if int(index) < 0 else int(index)
            if not 0 <= position < dim:
                raise IndexError("index %d is out of bounds for axis %d with size %d"
                                 % (int(index), axis, dim))
            begin.append(position)
            end.append(position + 1)
            step.append(1)
            dropped.append(axis)
    result = mx.sym.slice(target, begin=tuple(begin), end=tuple(end), step=tuple(step))
    # An integer index drops its axis; MXNet's squeeze keeps shape (1,) when every
    # axis goes, as a legacy NDArray does.
    return mx.sym.squeeze(result, axis=tuple(dropped)) if dropped else result
