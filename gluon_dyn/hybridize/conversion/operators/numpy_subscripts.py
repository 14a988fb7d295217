"""Indexing np symbols in converted code, as numpy indexes the np arrays they stand for.

MXNet's np symbol indexes with ints, slices and tuples of them only, and its
`x[-1]` builds a graph that fails when it runs; the np array takes what numpy
takes. Here, in a trace:

- basic indexing: ints (an int drops its axis, down to shape ()), slices, None,
  Ellipsis; an int out of range is numpy's IndexError;
- a one-element tensor standing for a Python int (a graph loop's counter:
  values.is_int_like) indexes as that int;
- one index array (an np symbol of integers, a list or NumPy array of them),
  with slices, and ints next to it: its values pick along its axis, its shape in
  that axis' place;
  or index arrays for the leading axes: the elements at their (broadcast) positions;
- one boolean mask (an np symbol of booleans, a list or NumPy array of them) over
  the leading axes: the elements where it is true, in a row per element, their
  number known when the graph runs (the graph is then run cut around it).

Other advanced indexing (index arrays apart from ints or one another, whose
result axes numpy moves) stops the trace naming the line.
"""
import numpy

import mxnet as mx
from mxnet.symbol.numpy import _internal as _npi

from ....origin import user_location
from ...capturing import tracing
from ...capturing.numpy_interface import as_legacy, as_numpy, is_numpy_symbol
from .values import is_int_like, is_symbol

_COPY, _DROP, _REST = -2, -3, -4     # np reshape codes: keep a dim, drop a size-1 dim, keep the rest


def get_item(target, key):
    """`target[key]` for an np symbol `target` with one output, in a trace."""
    trace = tracing.current()
    parts = tuple(_constant_or_part(part, trace)
                  for part in (key if isinstance(key, tuple) else (key,)))
    kinds = [_kind(part) for part in parts]
    if "mask" in kinds:
        if len(parts) != 1:
            raise _unsupported("a boolean mask beside other indices")
        return _masked(target, parts[0], trace)
    parts, kinds = _without_ellipsis(target, parts, kinds, trace)
    indexed = [(part, kind) for part, kind in zip(parts, kinds) if kind != "new axis"]
    if kinds.count("array") > 1:
        return _gathered(target, parts, kinds, trace)
    if "array" in kinds and not _adjacent([kind for _, kind in indexed]):
        # numpy moves the result's axes of such an index to the front
        raise _unsupported("an index array and ints with slices between them")
    result = _basic(target, indexed, trace)
    return _expanded(_picked(result, indexed), list(zip(parts, kinds)), trace)


def row_at(target, index):
    """`target[i]` for a one-element tensor `i` standing for an int."""
    return get_item(target, index)


def _kind(part):
    if part is None:
        return "new axis"
    if isinstance(part, slice):
        return "slice"
    if isinstance(part, (int, numpy.integer)) and not isinstance(part, bool):
        return "int"
    if part is Ellipsis:
        return "ellipsis"
    if is_symbol(part):
        if is_int_like(part):
            return "int tensor"
        return "mask" if _dtype(part) == numpy.bool_ else "array"
    raise _unsupported("an index of type %s" % type(part).__name__)


def _dtype(symbol):
    _, dtypes, _ = symbol.infer_type_partial()
    if not dtypes or dtypes[0] is None:
        raise tracing.FallbackRequired("indexing with a tensor whose dtype is not known while "
                                       "tracing (a boolean mask, or indices?)", user_location())
    return numpy.dtype(dtypes[0]).type


def _constant_or_part(part, trace):
    """A list or NumPy array in an index, as numpy reads it: a constant array of the
    graph (captured as an input, as arrays from outside converted code are)."""
    if isinstance(part, bool):
        raise _unsupported("a Python bool as an index")
    if isinstance(part, (list, numpy.ndarray)):
        return trace.capture(mx.np.array(numpy.asarray(part)))
    if isinstance(part, mx.nd.NDArray):
        return trace.capture(part.as_np_ndarray())
    return part


def _unsupported(what):
    return tracing.FallbackRequired("indexing an np array with %s is not traced into graphs"
                                    % what, user_location())


def _without_ellipsis(target, parts, kinds, trace):
    """`parts` and `kinds` with an Ellipsis as the whole slices it stands for."""
    if "ellipsis" not in kinds:
        return parts, kinds
    if kinds.count("ellipsis") > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    try:
        ndim = len(trace.inferred_shape(target))
    except AttributeError:
        raise _unsupported("an ellipsis on a value of unknown rank") from None
    at = kinds.index("ellipsis")
    whole = ndim - sum(kind not in ("new axis", "ellipsis") for kind in kinds)
    return (parts[:at] + (slice(None),) * whole + parts[at + 1:],
            kinds[:at] + ["slice"] * whole + kinds[at + 1:])


def _basic(target, indexed, trace):
    """The target sliced by the ints and slices among `indexed` ((part, kind) per
    axis; tensors take their whole axis here), the ints' axes dropped."""
    begin, end, step, codes = [], [], [], []
    for axis, (part, kind) in enumerate(indexed):
        if kind == "int":
            index = int(part)
            _check_bounds(target, axis, index, trace)
            begin.append(index)
            end.append(index + 1 if index != -1 else None)
            step.append(1)
            codes.append(_DROP)
        else:
            if isinstance(part, slice):
                if part.step == 0:
                    raise ValueError("slice step cannot be zero")
                begin.append(part.start)
                end.append(part.stop)
                step.append(part.step)
            else:
                begin.append(None)
                end.append(None)
                step.append(None)
            codes.append(_COPY)
    if all(b is None and e is None and s in (None, 1) for b, e, s in zip(begin, end, step)):
        return target
    sliced = _npi.slice(target, tuple(begin), tuple(end), tuple(step))
    return _npi.reshape(sliced, tuple(codes) + (_REST,)) if _DROP in codes else sliced


def _check_bounds(target, axis, index, trace):
    try:
        if axis >= trace.rank(target):
            raise IndexError("too many indices for array")
        (size,) = trace.dims_of(target, [axis])    # that axis' size only
    except AttributeError:   # a shape known only when the graph runs: MXNet checks then
        return
    if not -size <= index < size:
        raise IndexError("index %d is out of bounds for axis %d with size %d" % (index, axis, size))


def _adjacent(kinds):
    """Whether the ints and the index array among `kinds` (per indexed axis) are next
    to one another: the array's axes then take their place, as for one index."""
    advanced = [axis for axis, kind in enumerate(kinds) if kind in ("int", "int tensor", "array")]
    return advanced == list(range(advanced[0], advanced[-1] + 1))


def _picked(result, indexed):
    """`result` (after _basic) indexed by the tensors among `indexed`: an int tensor
    drops its axis, an index array puts its shape in its axis' place."""
    axis, picks = 0, []
    for part, kind in indexed:
        if kind in ("int tensor", "array"):
            picks.append((axis, part, kind))
        if kind != "int":
            axis += 1
    for axis, part, kind in reversed(picks):   # the last first: earlier axes keep their place
        if kind == "int tensor":
            part = _position(result, axis, part)
        result = mx.sym.np.take(result, as_numpy(part), axis=axis, mode="raise")
    return result


def _position(target, axis, index):
    """The int tensor `index` as a position along `axis` (a negative one counts from
    the end), an np int64 scalar: take drops the axis it indexes with a scalar."""
    index = as_legacy(index)
    length = mx.sym.cast(mx.sym.slice_axis(mx.sym.shape_array(as_legacy(target)), axis=0,
                                           begin=axis, end=axis + 1), dtype="float32")
    position = index + mx.sym.broadcast_mul(index < 0, length)
    return mx.sym.np.reshape(as_numpy(mx.sym.cast(position, dtype="int64")), ())


def _expanded(result, parts, trace):
    """`result` with a new axis of length 1 where `parts` ((part, kind)) hold None."""
    if not any(kind == "new axis" for _, kind in parts):
        return result
    axis = 0
    for part, kind in parts:
        if kind == "new axis":
            result = mx.sym.np.expand_dims(result, axis)
            axis += 1
        elif kind == "slice":
            axis += 1
        elif kind == "array":
            axis += len(trace.inferred_shape(part))
    return result


def _gathered(target, parts, kinds, trace):
    """`target[i, j, ...]` with index arrays for the leading axes (whole slices after
    them): the elements at the broadcast positions, as MXNet gathers them (indices
    as int32)."""
    arrays = kinds.count("array")
    if kinds[:arrays] != ["array"] * arrays or \
            any(part != slice(None) for part in parts[arrays:]):
        raise _unsupported("index arrays that are not the leading indices (or beside ints, "
                           "slices or new axes)")
    indices = [as_numpy(part).astype("int32") for part in parts[:arrays]]
    try:
        shape = numpy.broadcast_shapes(*[trace.static_shape(part) for part in parts[:arrays]])
        indices = [mx.sym.np.broadcast_to(index, shape) for index in indices]
    except AttributeError:   # shapes known when the graph runs: stacked as they come
        pass
    except ValueError as error:
        raise IndexError("shape mismatch: indexing arrays could not be broadcast together "
                         "(%s)" % error) from None
    return _npi.gather_nd(target, mx.sym.np.stack(indices))


def _masked(target, mask, trace):
    """`target[mask]`: the elements (rows of the remaining axes) where `mask`, over
    the leading axes, is true."""
    try:
        shape, mask_shape = trace.static_shape(target), trace.static_shape(mask)
    except AttributeError:
        raise _unsupported("a boolean mask on a value whose shape is not known while "
                           "tracing") from None
    if len(mask_shape) > len(shape):
        raise IndexError("too many indices, whose ndim = %d, for array with ndim = %d"
                         % (len(mask_shape), len(shape)))
    for axis, (size, mask_size) in enumerate(zip(shape, mask_shape)):
        if size != mask_size:
            raise IndexError("boolean index did not match indexed array along dimension %d; "
                             "dimension is %d but corresponding boolean dimension is %d"
                             % (axis, size, mask_size))
    remaining = tuple(shape[len(mask_shape):])
    if len(mask_shape) != 1:
        target = mx.sym.np.reshape(target, (-1,) + remaining)
        mask = mx.sym.np.reshape(mask, (-1,))
    return _npi.boolean_mask(target, as_numpy(mask))


def is_numpy_target(target):
    """Whether get_item here indexes `target`: an np symbol with one output."""
    return is_numpy_symbol(target) and len(target.list_outputs()) == 1
