"""Indexing in converted code: NDArray semantics for Symbols traced from NDArray code.

Outside a Block trace (a HybridBlock's hybrid_forward written for Symbols), and
on Symbols with several outputs, indexing keeps MXNet's Symbol meaning: select
an output.
"""
import mxnet as mx

from .. import tracing


def is_symbol(value):
    return isinstance(value, mx.sym.Symbol)


def get_item(target, key):
    trace = tracing.current()
    if not is_symbol(target) or trace is None or not trace.ndarray_code or \
            len(target.list_outputs()) > 1:
        return target[key]
    if is_symbol(key):
        return mx.sym.take(target, key, axis=0)
    if isinstance(key, int):
        return _row(target, key)
    return _index_like_ndarray(target, key if isinstance(key, tuple) else (key,))


def _row(target, index):
    """`x[i]`: reads only the length of axis 0, so the graph fits any other sizes."""
    shape = target.shape
    length, ndim = shape[0], len(shape)
    position = index + length if index < 0 else index
    if not 0 <= position < length:
        raise IndexError("index %d is out of bounds for axis 0 with size %d" % (index, length))
    row = mx.sym.slice_axis(target, axis=0, begin=position, end=position + 1)
    # Dropping axis 0 (merge it into the next); a 1-D row stays (1,) as for NDArrays.
    return mx.sym.reshape(row, shape=(-3, -2)) if ndim > 1 else row


def _index_like_ndarray(target, key):
    shape = target.shape
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
