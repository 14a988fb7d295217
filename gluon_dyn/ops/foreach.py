"""foreach: a loop over axis 0 of arrays, carrying states (a scan; a map when there are no states)."""
import mxnet as mx
from mxnet import autograd

from . import numpy_arrays, subgraph
from .while_loop import while_loop
from .steps import StepOutputs, check_states, flatten_traced_step, zeros
from .structure import (ControlFlowError, check_callable, check_name, common_kind, flatten, located,
                        regroup, unpack_body_result)

OP = "foreach"


@located
def foreach(body, data, init_states, name="foreach"):
    """Run `body` on each slice of `data` along axis 0, carrying `init_states` through.

    The semantics, as Python::

        def foreach(body, data, init_states):
            states = init_states
            outputs = []
            for i in range(len(data)):              # every array in `data` has this length
                out, states = body(data[i], states)  # data[i]: a slice, or a list of slices
                outputs.append(out)
            return stack(outputs), states            # stacked along a new axis 0

    `data` is an array or a (nested) list of arrays; `init_states` and the body's
    outputs may be arrays, nested lists, or empty (`[]` / None): foreach as a map has
    no states, foreach as a scan may have no outputs. States keep their structure,
    shapes and dtypes from step to step. With NDArrays the loop runs now; with
    Symbols (inside `hybrid_forward`) it becomes one `_foreach` node. Gradients flow
    to the data, the initial states and every array or parameter the body closes over.

    A loop over zero rows returns outputs with zero rows: the body is evaluated once,
    under `autograd.pause()`, on zero-filled slices to learn their shapes.

    `name` names the body's subgraph (`<name>0`, `<name>1`, ...), as in
    `mx.sym.contrib.foreach`.
    """
    check_callable(body, OP, "body")
    check_name(name, OP)
    body = _on_legacy_views(body, data, init_states)
    state_kinds = numpy_arrays.kinds(init_states)
    outputs, states = _foreach(body, numpy_arrays.as_legacy(data),
                               numpy_arrays.as_legacy(init_states), name)
    return (numpy_arrays.restored(outputs, (body.kinds or [None])[0]),
            numpy_arrays.restored(states, state_kinds))


def _on_legacy_views(body, data, init_states):
    """`body` taking rows and states as legacy views (numpy_arrays.py), giving them to
    the user's body as the kinds `data` and `init_states` have."""
    data_kinds, state_kinds = numpy_arrays.kinds(data), numpy_arrays.kinds(init_states)
    return numpy_arrays.Returned(lambda rows, states: body(
        numpy_arrays.restored(rows, data_kinds), numpy_arrays.restored(states, state_kinds)))


def _foreach(body, data, init_states, name):
    flat_data, data_fmt = flatten(data, OP, "data")
    flat_states, state_fmt = flatten(init_states, OP, "init_states")
    if not flat_data:
        raise ControlFlowError("foreach: data must contain at least one array to iterate over")
    kind = common_kind(flat_data + flat_states, OP)
    if kind == "ndarray":
        return _foreach_ndarray(body, flat_data, data_fmt, flat_states, state_fmt)
    return _foreach_symbol(body, flat_data, data_fmt, flat_states, state_fmt, name)


def _foreach_ndarray(body, flat_data, data_fmt, flat_states, state_fmt):
    for i, array in enumerate(flat_data):
        if array.ndim == 0:
            raise ControlFlowError("foreach: data %d is a scalar; foreach iterates over axis 0" % i)
    length = flat_data[0].shape[0]
    for i, array in enumerate(flat_data[1:], 1):
        if array.shape[0] != length:
            raise ControlFlowError("foreach: data %d has %d rows on axis 0 but data 0 has %d"
                                   % (i, array.shape[0], length))
    outputs = StepOutputs(OP)
    states = flat_states
    for step in range(length):
        out, new_states = _call_body(body, [a[step] for a in flat_data], data_fmt, states, state_fmt)
        outputs.add(out, step)
        states = check_states(OP, "state", new_states, state_fmt, states, step)
    if length == 0:
        # A row of 1-D data is an array of shape (1,), as `a[0]` gives.
        zero_slices = [zeros(a.shape[1:] or (1,), a) for a in flat_data]
        with autograd.pause():
            example, _ = _call_body(body, zero_slices, data_fmt, states, state_fmt)
        return outputs.empty(example, 0), regroup(states, state_fmt)
    return outputs.stacked(), regroup(states, state_fmt)


def _call_body(body, flat_slices, data_fmt, flat_states, state_fmt):
    return unpack_body_result(body(regroup(flat_slices, data_fmt), regroup(flat_states, state_fmt)),
                              OP, "body")


def _foreach_symbol(body, flat_data, data_fmt, flat_states, state_fmt, name):
    num_data, num_states = len(flat_data), len(flat_states)
    traced = {}

    def trace_body(placeholders):
        out, new_states = _call_body(body, placeholders[:num_data], data_fmt,
                                     placeholders[num_data:], state_fmt)
        flat_out, traced["out_fmt"], flat_new = flatten_traced_step(OP, out, new_states, state_fmt,
                                                                    "states")
        traced["num_out"] = len(flat_out)
        return flat_out, flat_new

    body_graph = subgraph.trace(trace_body, num_data + num_states, name)
    if body_graph.has_dynamic_shapes:
        rows = subgraph.known_rows(flat_data[0]) if traced["num_out"] else None
        if traced["num_out"] and rows is None:
            raise ControlFlowError(
                "foreach: on Symbols, a body that returns per-step outputs and contains cond or "
                "while_loop needs the number of rows when the graph is built: MXNet 1.9.1's "
                "_foreach needs every shape in its body before it runs, and _cond/_while_loop "
                "learn theirs only while running, so the loop runs as a while_loop whose "
                "per-step outputs are allocated up front. hybridize(dynamic=True) knows the rows; "
                "plain hybridize does not; with the Symbol API, declare the data's shape "
                "(mx.sym.var(name, shape=...)). Carry the values as states instead, or use "
                "while_loop with max_iterations for the outer loop")
        return _foreach_as_while_loop(body, flat_data, data_fmt, flat_states, state_fmt, name,
                                      rows)
    num_out_data = traced["num_out"] + body_graph.num_extra
    outer = [src for src in body_graph.sources if not isinstance(src, int)]
    node = mx.sym._internal._foreach(
        body_graph.graph, *(flat_data + flat_states + outer),
        num_outputs=num_out_data + num_states, num_out_data=num_out_data,
        in_data_locs=[body_graph.placeholder_position(i) for i in range(num_data)],
        in_state_locs=[body_graph.placeholder_position(num_data + i) for i in range(num_states)],
        remain_locs=[pos for pos, src in enumerate(body_graph.sources) if not isinstance(src, int)])
    outputs = [node[i] for i in range(traced["num_out"])]
    states = [node[num_out_data + i] for i in range(num_states)]
    return regroup(outputs, traced["out_fmt"]), regroup(states, state_fmt)


def _foreach_as_while_loop(body, flat_data, data_fmt, flat_states, state_fmt, name, rows):
    """A foreach as a `_while_loop` over the rows (its body may hold nodes whose shapes
    are known only at run time). Per-step outputs need `rows`, the number of rows,
    as the loop's bound: it allocates them up front; without any, `rows` is None."""
    length = mx.sym.cast(mx.sym.slice_axis(mx.sym.shape_array(flat_data[0]), axis=0, begin=0, end=1),
                         dtype="float32")
    num_states = len(flat_states)
    traced = {}

    def step(index, *states):
        data_rows = [mx.sym.squeeze(mx.sym.take(array, index, axis=0), axis=0)
                     for array in flat_data]
        out, new_states = _call_body(body, data_rows, data_fmt, list(states), state_fmt)
        flat_out, traced["out_fmt"], flat_new = flatten_traced_step(OP, out, new_states,
                                                                    state_fmt, "states")
        return flat_out, [index + 1] + flat_new

    # Without per-step outputs max_iterations allocates nothing: it is only a bound.
    outputs, final = while_loop(lambda index, *states: index < length, step,
                                [mx.sym.zeros((1,))] + flat_states,
                                max_iterations=2 ** 31 - 1 if rows is None else max(rows, 1),
                                name=name)
    states = regroup(final[1:1 + num_states], state_fmt)
    if rows is None:
        return [], states
    outputs = outputs if isinstance(outputs, list) else [outputs]
    if rows == 0:   # the loop ran no step; its one padding row is not a step's
        outputs = [mx.sym.slice_axis(output, axis=0, begin=0, end=0) for output in outputs]
    return regroup(outputs, traced["out_fmt"]), states
