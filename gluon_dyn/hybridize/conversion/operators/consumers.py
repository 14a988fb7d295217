"""Lists holding elements appended under tensor control flow (effects.py), consumed
by graph operations over the elements present in the run.

`stack(*acc)` and `concat(*acc, dim=0)` keep the present elements, in order (a
`boolean_mask`: the result's first dimension depends on the data, as imperatively);
`add_n(*acc)` and `sum(acc)` add them. Other uses stop the trace (the marker says
why) and the forward runs as Python.
"""
import builtins

import mxnet as mx

from ....origin import caller_location
from ...capturing import effects, tracing


def holds_markers(args):
    return any(effects.is_marker(a) or (isinstance(a, (list, tuple)) and
                                        any(effects.is_marker(v) for v in a)) for a in args)


def consume(f, args, kwargs):
    """`f(*args, **kwargs)` where the arguments hold markers."""
    kwargs = dict(kwargs or {})
    if f is mx.sym.stack and set(kwargs) <= {"axis"}:
        return _stack(args, kwargs.get("axis", 0))
    if f in (mx.sym.concat, mx.sym.Concat) and kwargs == {"dim": 0}:
        return _concat_rows(args)
    if f in (mx.sym.add_n, mx.sym.ElementWiseSum) and not kwargs:
        return _present_sum(args)
    if f is builtins.sum and len(args) == 1 and not kwargs:
        return _present_sum(args[0])
    raise _unsupported(getattr(f, "__name__", type(f).__name__))


def _unsupported(what):
    return tracing.FallbackRequired(
        "a list appended to under a branch or loop on a tensor is passed to %s; such lists can be "
        "stacked, concatenated along dim 0, summed or added" % what, caller_location(depth=4))


def _stack(items, axis):
    if not isinstance(axis, int) or axis < 0:
        raise _unsupported("stack with axis=%r (a non-negative axis is needed)" % (axis,))
    rows, masks = [], []
    for item in items:
        if isinstance(item, effects.Rows):
            rows.append(item.stacked)
            masks.append(item.valid)
        else:
            value, present = _value_and_presence(item)
            rows.append(mx.sym.expand_dims(value, axis=0))
            masks.append(present)
    stacked = mx.sym.contrib.boolean_mask(mx.sym.concat(*rows, dim=0),
                                          mx.sym.concat(*masks, dim=0))
    for position in range(axis):   # the stacking axis, from 0 to `axis`
        stacked = mx.sym.swapaxes(stacked, dim1=position, dim2=position + 1)
    return stacked


def _concat_rows(items):
    """Every present element's rows (each element may hold several)."""
    rows, masks = [], []
    for item in items:
        if isinstance(item, effects.Rows):
            # (steps, rows per element, ...): each valid step's element gives its rows.
            rows.append(mx.sym.reshape(item.stacked, shape=(-3, -2)))
            masks.append(mx.sym.reshape(mx.sym.broadcast_like(
                mx.sym.reshape(item.valid, shape=(-1, 1)), _first_column(item.stacked, 2)),
                shape=(-1,)))
            continue
        value, present = _value_and_presence(item)
        rows.append(value)
        masks.append(mx.sym.broadcast_like(present, mx.sym.reshape(_first_column(value, 1),
                                                                   shape=(-1,))))
    return mx.sym.contrib.boolean_mask(mx.sym.concat(*rows, dim=0), mx.sym.concat(*masks, dim=0))


def _first_column(value, leading):
    """`value` cut to its first `leading` dimensions (a column of one element per row):
    the shape a per-row mask is broadcast to."""
    flat = mx.sym.reshape(value, shape=(0,) * leading + (-1,))
    return mx.sym.reshape(mx.sym.slice_axis(flat, axis=leading, begin=0, end=1),
                          shape=(0,) * leading)


def _present_sum(items):
    total = None
    for item in items:
        if isinstance(item, effects.Rows):
            term = mx.sym.sum(mx.sym.where(item.valid, item.stacked,
                                           mx.sym.zeros_like(item.stacked)), axis=0)
        else:
            value, present = _value_and_presence(item)
            term = mx.sym.broadcast_mul(value, present)
        total = term if total is None else total + term
    return total


def _value_and_presence(item):
    if isinstance(item, effects.Conditional):
        return item.value, item.present
    return item, mx.sym.ones((1,))
