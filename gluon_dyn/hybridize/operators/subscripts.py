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

from .. import effects, tracing
from ..symbolic_shapes import SymbolicDim
from .values import as_tensor, is_int_like, is_symbol, length_of


def get_item(target, key):
    trace = tracing.current()
    if not is_symbol(target) or trace is None or len(target.list_outputs()) > 1:
        effects.refuse_markers(target, "indexed")
        return target[key]
    key_parts = key if isinstance(key, tuple) else (key,)
    if not trace.ndarray_code:
        # hybrid_forward code: an int selects an output, as for any Symbol; slices
        # (which plain Symbols reject) take NDArray's meaning.
        if not any(isinstance(part, slice) for part in key_parts):
            return target[key]
        return _slices_without_shape(target, key_parts)
    if is_symbol(key) or isinstance(key, SymbolicDim):
        if is_int_like(key):
            return row_at(target, as_tensor(key))
        return mx.sym.take(target, key, axis=0)   # an index array: its axes stay
    try:
        shape = tracing.static_shape(target)
    except AttributeError:  # a shape only known at run time (after a cond)
        return _slices_without_shape(target, key_parts)
    if isinstance(key, int):
        return _row(target, key, shape)
    return _index_like_ndarray(target, key_parts, shape)


def row_at(target, index):
    """`x[i]` for a one-element tensor `i` standing for an int, as an int indexes:
    a negative index counts from the end, one out of range is an error (take's
    "raise" mode, where the default "clip" would give another row), and axis 0 is
    dropped; a 1-D row stays (1,)."""
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


def _row(target, index, shape):
    """`x[i]`: reads only the length of axis 0, so the graph fits any other sizes."""
    length, ndim = shape[0], len(shape)
    position = index + length if index < 0 else index
    if not 0 <= position < length:
        raise IndexError("index %d is out of bounds for axis 0 with size %d" % (index, length))
    row = mx.sym.slice_axis(target, axis=0, begin=position, end=position + 1)
    # Dropping axis 0 (merge it into the next); a 1-D row stays (1,) as for NDArrays.
    return mx.sym.reshape(row, shape=(-3, -2)) if ndim > 1 else row


def _index_like_ndarray(target, key, shape):
    if len(key) > len(shape):
        raise IndexError("too many indices (%d) for an array of shape %s" % (len(key), shape))
    begin, end, step, kept = [], [], [], []
    for axis, dim in enumerate(shape):
        index = key[axis] if axis < len(key) else slice(None)
        if isinstance(index, slice):
            start, stop, stride = index.indices(dim)
            begin.append(start)
            end.append(stop if stop >= 0 or stride > 0 else None)
            step.append(stride)
            kept.append(len(range(start, stop, stride)))
        else:
            position = int(index) + dim if int(index) < 0 else int(index)
            if not 0 <= position < dim:
                raise IndexError("index %d is out of bounds for axis %d with size %d"
                                 % (int(index), axis, dim))
            begin.append(position)
            end.append(position + 1)
            step.append(1)
    result = mx.sym.slice(target, begin=tuple(begin), end=tuple(end), step=tuple(step))
    # An integer index drops its axis; a legacy NDArray keeps at least one.
    return mx.sym.reshape(result, shape=tuple(kept) or (1,))
