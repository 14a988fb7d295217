"""`x[key] = value` in converted code: NDArray's item assignment, in graphs.

converters/item_assignment.py makes the statement `x = ag__.set_item(x, key, value)`.
Outside a trace, and for lists, dicts and the like, it is Python's own assignment.
While tracing, an array assigned into is a Symbol: the assignment builds the new
array with the operators NDArray.__setitem__ runs (`_slice_assign`,
`_slice_assign_scalar`, `_scatter_set_nd`, `full`, after the same key expansion,
bounds checks, casting and broadcasting of the value), and every holder of the
array then sees it (aliases.py), as every holder of an NDArray assigned into in
place does.

Gradients: MXNet's autograd refuses an in-place assignment while it records
unless no array involved is recorded, and then none has a gradient to pass on. So
the new array has no gradient (BlockGrad, which MXNet's graphs also need around
these operators, which have none), and while autograd records, an assignment
involving anything but constants runs as Python (a graph break), where MXNet
decides whether it raises.
"""
import functools

import mxnet as mx
import numpy as np
from mxnet import autograd
from mxnet.ndarray import ndarray as nd_internals

from ....origin import user_location
from ...capturing import tracing
from ...capturing.host_values import HostValue
from ...capturing.numpy_arguments import is_numpy_argument
from ...capturing.numpy_interface import is_numpy_symbol
from . import aliases
from .values import graph_constant, is_symbol

# NDArray's own: what it assigns as a scalar, and what indexes as an int.
_NUMBERS = nd_internals.numeric_types
_INTEGERS = nd_internals.integer_types
_ARRAY_LIKE = (mx.nd.NDArray, np.ndarray, list, tuple, range)


def set_item(target, key, value, unrebindable=None):
    """`target[key] = value`; returns what the assigned name holds afterwards.
    `unrebindable`: None where rebinding the assigned name alone gives what imperative
    code sees when the array cannot change in place (aliases.py), else why not (the
    converter's finding: the name is also held elsewhere, or the target is not a
    name)."""
    trace = tracing.current()
    if trace is None or not _traced_array(target):
        if trace is not None and isinstance(target, mx.nd.NDArray):
            raise tracing.FallbackRequired(
                "assigning into an NDArray made outside converted code (a parameter's data, "
                "an array from a library call) changes it in place on every call, which a "
                "graph cannot replay", user_location(), breakable=True)
        target[key] = value
        return target
    _refuse_while_recording(target, key, value)
    updated = mx.sym.BlockGrad(updated_array(target, key, value))
    if aliases.view_of(target) is None:
        why = aliases.refusal(target)
        if why is not None and (aliases.is_graph_input(target) or unrebindable):
            raise tracing.FallbackRequired(
                "assigning into this array changes it in place, but %s%s" % (
                    why, "" if aliases.is_graph_input(target) else "; and %s" % unrebindable),
                user_location(), breakable=True)
    return aliases.assign(target, updated)


def _traced_array(target):
    """Whether `target` is a traced array NDArray semantics apply to: a legacy Symbol
    with one output (a Symbol with several has no item assignment; np symbols assign
    as MXNet's numpy interface does)."""
    return is_symbol(target) and not is_numpy_symbol(target) and \
        len(target.list_outputs()) == 1


def _refuse_while_recording(target, key, value):
    if not autograd.is_recording():
        return
    parts = [target, value] + list(key if isinstance(key, tuple) else (key,))
    if any(_maybe_recorded(part) for part in parts):
        raise tracing.FallbackRequired(
            "an assignment into an array while autograd records: MXNet refuses it when an "
            "array involved is in the computational graph, which only running it can tell",
            user_location(), breakable=True)


def _maybe_recorded(value):
    if isinstance(value, HostValue):
        value = value.symbol
    if is_symbol(value):
        return bool(value.list_inputs())   # made from graph inputs, not constants only
    return isinstance(value, mx.nd.NDArray)


def updated_array(target, key, value):
    """A new Symbol: `target` (a legacy Symbol of one output) after NDArray's
    `target[key] = value`."""
    try:
        shape = tuple(tracing.static_shape(target))
    except AttributeError:
        raise tracing.FallbackRequired("assigning into an array whose shape is known only when "
                                       "the graph runs", user_location()) from None
    if not shape:
        raise tracing.FallbackRequired("assigning into an array of no axes", user_location())
    target_array = _TracedArray(target, shape, tracing.dtype_of(target))
    key, _ = nd_internals.indexing_key_expand_implicit_axes(key, shape)
    key_nd = tuple(part for part in key if part is not None)
    if len(key_nd) > len(shape):
        raise IndexError("too many indices (%d) for array with %d dimensions"
                         % (len(key_nd), len(shape)))
    if any(_is_advanced(part) for part in key_nd):
        return _advanced(target_array, key, value)
    return _basic(target_array, key, value)


class _TracedArray:
    """The array assigned into: its Symbol, shape and dtype."""

    def __init__(self, symbol, shape, dtype):
        self.symbol, self.shape, self.dtype = symbol, shape, np.dtype(dtype)


def _is_advanced(part):
    """Whether a key part makes NDArray's indexing advanced: an index array (or a
    value standing for an int the graph computes, which indexes as one)."""
    return isinstance(part, _ARRAY_LIKE) or is_symbol(part) or isinstance(part, HostValue)


def _basic(target, key, value):
    """NDArray._set_nd_basic_indexing, on Symbols."""
    shape = target.shape
    key_nd = tuple(part for part in key if part is not None)
    int_axes = [axis for axis, part in enumerate(key_nd) if isinstance(part, _INTEGERS)]
    for axis in int_axes:
        if not -shape[axis] <= key_nd[axis] < shape[axis]:
            raise IndexError("index %d is out of bounds for axis %d with size %d"
                             % (key_nd[axis], axis, shape[axis]))
    begin, end, step = mx.nd.NDArray._basic_indexing_key_to_begin_end_step(
        key, shape, keep_none=False)
    indexed_shape = tuple(nd_internals._get_dim_size(b, e, s) for b, e, s in zip(begin, end, step))
    whole = indexed_shape == shape and all(s > 0 for s in step)
    begin, end, step = mx.nd.NDArray._basic_indexing_key_to_begin_end_step(
        key, shape, keep_none=True)
    none_axes = [axis for axis, part in enumerate(key) if part is None]
    new_axes = mx.nd.NDArray._new_axes_after_basic_indexing(none_axes, key)
    bcast_shape = mx.nd.NDArray._drop_int_axes(indexed_shape, int_axes)
    if 0 in shape:
        return aliases.fresh(target.symbol)
    if whole:
        return _whole(target, value, bcast_shape, new_axes, int_axes)
    if isinstance(value, _NUMBERS):
        return mx.sym._internal._slice_assign_scalar(target.symbol, scalar=float(value),
                                                     begin=begin, end=end, step=step)
    value = mx.sym.reshape(_prepared(target, value, bcast_shape, new_axes), shape=indexed_shape)
    return mx.sym._internal._slice_assign(target.symbol, value, begin=begin, end=end, step=step)


def _whole(target, value, bcast_shape, new_axes, int_axes):
    """Every element assigned (`x[:] = value`): the new array is the value."""
    if is_symbol(value) and value.handle.value == target.symbol.handle.value:
        return aliases.fresh(target.symbol)     # x[:] = x
    if isinstance(value, _NUMBERS):
        return mx.sym.full(target.shape, int(value) if isinstance(value, bool) else value,
                           dtype=target.dtype.name)
    if isinstance(value, (np.ndarray, np.generic)) and not is_numpy_argument(value):
        value = value.reshape(nd_internals._shape_for_bcast(value.shape, len(target.shape),
                                                            int_axes))
        return aliases.fresh(graph_constant(np.broadcast_to(value, target.shape), target.dtype))
    return aliases.fresh(mx.sym.reshape(_prepared(target, value, bcast_shape, new_axes),
                                        shape=target.shape))


def _advanced(target, key, value):
    """NDArray._set_nd_advanced_indexing, on Symbols: the key's parts as index arrays
    (as NDArray._get_index_nd makes them), then `_scatter_set_nd`."""
    indices, indices_shape, new_axes = _index_arrays(target, key)
    value_shape = nd_internals.get_oshape_of_gather_nd_op(target.shape, indices_shape)
    value = _prepared(target, value, value_shape, new_axes)
    return mx.sym._internal._scatter_set_nd(lhs=target.symbol, rhs=value, indices=indices,
                                            shape=target.shape)


def _index_arrays(target, key):
    """(the stacked index array, its shape, where new axes end up), as
    NDArray._get_index_nd computes them."""
    shape = target.shape
    key_nd = tuple(part for part in key if part is not None)
    ndim = len(key_nd)
    advanced = [axis for axis, part in enumerate(key) if _is_advanced(part) or
                isinstance(part, _INTEGERS)]
    advanced_nd = [axis for axis, part in enumerate(key_nd) if _is_advanced(part) or
                   isinstance(part, _INTEGERS)]
    adjacent = bool(np.all(np.diff(advanced) == 1))
    short = list(key_nd)
    while isinstance(short[-1], slice) and short[-1] == slice(None):
        short.pop()
    dropped = set(range(len(short), ndim))
    if adjacent:
        order = list(range(ndim))
        block = advanced_nd
        parts = short
    else:
        order = advanced_nd + [axis for axis in range(ndim) if axis not in advanced_nd]
        block = list(range(len(advanced_nd)))
        parts = [key_nd[axis] for axis in advanced_nd] + \
            [key_nd[axis] for axis in range(ndim) if axis not in advanced_nd and
             axis not in dropped]
    lengths = [shape[axis] for axis in order]
    arrays = [_index_array(part, length) for part, length in zip(parts, lengths)]
    broadcast = _broadcast_indices(arrays, block)
    inverse = list(np.argsort(order))
    kept = [broadcast[axis] for axis in inverse if order[axis] not in dropped]
    block_shape = _broadcast_shape([arrays[axis][1] for axis in block])
    new_axes = mx.nd.NDArray._new_axes_after_advanced_indexing(key, advanced, len(block_shape),
                                                               adjacent)
    stacked_shape = (len(kept),) + kept[0][1]
    return mx.sym.stack(*[array for array, _ in kept], axis=0), stacked_shape, new_axes


def _index_dtype():
    return "int64" if nd_internals._int64_enabled() else "int32"


def _index_array(part, length):
    """(Symbol of indices, its shape) for one part of an advanced key, as
    NDArray._advanced_index_to_array converts it."""
    dtype = _index_dtype()
    if isinstance(part, HostValue):
        if not issubclass(part.type, (int, np.integer)) or issubclass(part.type, bool):
            raise part.needed("an index of type %s" % part.type.__name__)
        return mx.sym.cast(part.symbol, dtype=dtype), (1,)
    if is_numpy_argument(part):
        return mx.sym.cast(part.symbol, dtype=dtype), tuple(part.shape)
    if is_symbol(part):
        if tracing.dtype_of(part) == np.bool_:
            raise ValueError("Cannot perform boolean indexing in legacy mode. Please activate "
                             "numpy semantics by calling `npx.set_np()` in the global scope "
                             "before calling this function.")
        return mx.sym.cast(part, dtype=dtype), tuple(tracing.static_shape(part))
    if isinstance(part, mx.nd.NDArray):
        return mx.sym.cast(tracing.current().capture(part), dtype=dtype), part.shape
    if isinstance(part, (np.ndarray, list, tuple)):
        indices = np.array(part, dtype=dtype)
        return graph_constant(indices, dtype), indices.shape
    if isinstance(part, _INTEGERS):
        return mx.sym.full((1,), int(part), dtype=dtype), (1,)
    if isinstance(part, slice):
        part = range(*part.indices(length))
    if isinstance(part, range):
        return mx.sym.arange(part.start, part.stop, part.step, dtype=dtype), (len(part),)
    raise RuntimeError("illegal index type %s" % type(part))


def _broadcast_indices(arrays, block):
    """NDArray._broadcast_advanced_indices on (Symbol, shape) pairs."""
    block_shape = _broadcast_shape([arrays[axis][1] for axis in block])
    delta = len(block_shape) - len(block)
    lead, trail = block[0], len(arrays) - (block[-1] + 1)
    full_shape = tuple(arrays[axis][1][0] for axis in range(lead)) + block_shape + \
        tuple(arrays[axis][1][0] for axis in range(block[-1] + 1, len(arrays)))
    result = [None] * len(arrays)
    for axis in block:
        array = _broadcast_to(arrays[axis], block_shape)
        array = mx.sym.reshape(array, shape=(1,) * lead + block_shape + (1,) * trail)
        result[axis] = (mx.sym.broadcast_to(array, shape=full_shape), full_shape)
    for axis in set(range(len(arrays))) - set(block):
        placed = [1] * len(full_shape)
        placed[axis if axis < lead else axis + delta] = arrays[axis][1][0]
        array = mx.sym.reshape(arrays[axis][0], shape=tuple(placed))
        result[axis] = (mx.sym.broadcast_to(array, shape=full_shape), full_shape)
    return result


def _broadcast_shape(shapes):
    return tuple(functools.reduce(lambda a, b: np.broadcast_shapes(a, b), shapes, ()))


def _broadcast_to(array_and_shape, shape):
    """NDArray.broadcast_to: leading axes of length 1 added first."""
    array, own = array_and_shape
    if own == shape:
        return array
    if len(own) < len(shape):
        array = mx.sym.reshape(array, shape=(1,) * (len(shape) - len(own)) + tuple(own))
    return mx.sym.broadcast_to(array, shape=shape)


def _prepared(target, value, bcast_shape, squeeze_axes):
    """NDArray._prepare_value_nd: `value` as a Symbol of `bcast_shape` and the
    target's dtype."""
    if isinstance(value, _NUMBERS):
        return mx.sym.full(bcast_shape, value, dtype=target.dtype.name)
    if isinstance(value, HostValue):
        value = value.symbol
    if is_numpy_argument(value):
        value = value.symbol
    if isinstance(value, mx.nd.NDArray):
        value = tracing.current().capture(value)
    if is_symbol(value):
        if is_numpy_symbol(value) or len(value.list_outputs()) != 1:
            raise TypeError("%s does not support assignment with non-array-like object %s of "
                            "type %s" % (mx.nd.NDArray, value, type(value)))
        if tracing.current().inferred_dtype(value) != target.dtype:
            value = mx.sym.cast(value, dtype=target.dtype.name)
        shape = tuple(tracing.static_shape(value))
    else:
        try:
            constant = np.array(value, dtype=target.dtype)
        except Exception:  # noqa: BLE001 - NDArray's own message follows
            raise TypeError("%s does not support assignment with non-array-like object %s of "
                            "type %s" % (mx.nd.NDArray, value, type(value))) from None
        value, shape = graph_constant(constant, target.dtype), constant.shape
    if squeeze_axes and len(shape) > len(bcast_shape):
        axes = tuple(axis for axis in squeeze_axes if axis < len(shape))
        value, shape = mx.sym.squeeze(value, axis=axes), _squeezed(shape, axes)
    if len(shape) > len(bcast_shape):
        leading = []
        for axis in range(len(shape) - len(bcast_shape)):
            if shape[axis] != 1:
                break
            leading.append(axis)
        if leading:
            value, shape = mx.sym.squeeze(value, axis=tuple(leading)), _squeezed(shape, leading)
    if shape != tuple(bcast_shape):
        if int(np.prod(shape)) == 0:
            return mx.sym.reshape(value, shape=bcast_shape)
        return _broadcast_to((value, shape), tuple(bcast_shape))
    return value


def _squeezed(shape, axes):
    return tuple(size for axis, size in enumerate(shape) if axis not in axes)
