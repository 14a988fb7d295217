"""while_loop: repeat a body while a tensor predicate holds, stacking per-step outputs."""
import mxnet as mx
from mxnet import autograd

from .. import native
from . import subgraph
from .cond import cond as branch_on
from .steps import StepOutputs, check_states, flatten_traced_step
from .structure import (ControlFlowError, array_kind, check_callable, common_kind, describe, flatten,
                        regroup, unpack_body_result)

OP = "while_loop"


def while_loop(cond, func, loop_vars, max_iterations=None):
    """Run `func` while `cond` holds, carrying `loop_vars`.

    The semantics, as Python::

        def while_loop(cond, func, loop_vars, max_iterations=None):
            outputs, steps = [], 0
            while (max_iterations is None or steps < max_iterations) and bool(cond(*loop_vars)):
                step_output, loop_vars = func(*loop_vars)
                outputs.append(step_output)
                steps += 1
            if max_iterations is not None:
                outputs += [zeros_like(step_output)] * (max_iterations - steps)
            return stack(outputs), loop_vars

    `loop_vars` is one array or a list of them (each element may itself be a nested
    list); `cond(*loop_vars)` returns an array of one element and
    `func(*loop_vars)` returns `(step_output, new_loop_vars)`, where new_loop_vars
    keeps the structure, shapes and dtypes of loop_vars and step_output may be empty.

    With NDArrays the loop runs now and, without max_iterations, the outputs have
    exactly one row per step run. With Symbols (inside `hybrid_forward`) the loop is
    one `_while_loop` node; a graph's shapes are fixed before it runs, so
    max_iterations is required and outputs always have max_iterations rows, the rows
    past the last step being zeros. Gradients flow to the loop variables and to
    every array or parameter that `cond` or `func` closes over.

    A loop that runs no step still returns outputs of the right structure: func is
    evaluated once, under `autograd.pause()`, on the initial loop_vars to learn it.
    """
    check_callable(cond, OP, "cond")
    check_callable(func, OP, "func")
    single = array_kind(loop_vars) is not None
    flat_vars, var_fmt = flatten([loop_vars] if single else loop_vars, OP, "loop_vars")
    if not flat_vars:
        raise ControlFlowError("while_loop: loop_vars must contain at least one array")
    kind = common_kind(flat_vars, OP)
    if max_iterations is not None:
        max_iterations = _as_iteration_count(max_iterations)
    run = _while_ndarray if kind == "ndarray" else _while_symbol
    outputs, final = run(cond, func, flat_vars, var_fmt, max_iterations)
    final = regroup(final, var_fmt)
    return outputs, final[0] if single else final


def _as_iteration_count(max_iterations):
    value = max_iterations.asscalar() if array_kind(max_iterations) == "ndarray" else max_iterations
    if isinstance(value, bool) or int(value) != value or value < 0:
        raise ControlFlowError("while_loop: max_iterations must be a non-negative integer, got %s"
                               % describe(max_iterations))
    return int(value)


def _predicate_value(pred):
    if array_kind(pred) != "ndarray":
        if isinstance(pred, (bool, int)):
            return bool(pred)
        raise ControlFlowError("while_loop: cond must return an NDArray of one element, got %s"
                               % describe(pred))
    if pred.size != 1:
        raise ControlFlowError("while_loop: cond must return a scalar (one element), got shape %s"
                               % (pred.shape,))
    return bool(pred.asscalar())


def _call_func(func, flat_vars, var_fmt):
    out, new_vars = unpack_body_result(func(*regroup(flat_vars, var_fmt)), OP, "func")
    # A single loop variable may come back bare or in a one-element list.
    return out, [new_vars] if array_kind(new_vars) is not None else new_vars


def _differentiable_predicate(pred, counter):
    """The predicate as float32, plus zero times the counter.

    MXNet's loop backward expects every subgraph output's gradient to be consumed
    on a path to an input (cached_op.cc: "in_attrs->size() == bwd_input_eid.size()");
    a comparison's gradient is not, the counter's is.
    """
    return mx.sym.broadcast_add(mx.sym.cast(pred, dtype="float32"), 0 * counter)


def _zero_padding_rows(outputs, steps_run, max_iterations):
    # Rows past the last step are uninitialised memory in MXNet's output: select
    # zeros there (a product with a mask would turn NaN garbage into NaN).
    ran = mx.sym.broadcast_lesser(mx.sym.arange(max_iterations), steps_run)
    return [mx.sym.where(ran, out, mx.sym.zeros_like(out)) for out in outputs]


def _zero_rows_like_one_step(func, flat_vars, var_fmt, max_iterations):
    # After zero steps MXNet's outputs have no meaningful shape; one step's worth
    # of func on the initial values gives it (run only in that case).
    out, _ = _call_func(func, flat_vars, var_fmt)
    flat_out, _ = flatten(out, OP, "func's step output")
    return [mx.sym.zeros_like(mx.sym.broadcast_axis(mx.sym.expand_dims(o, axis=0), axis=0,
                                                    size=max_iterations)) for o in flat_out]


def _while_ndarray(cond, func, flat_vars, var_fmt, max_iterations):
    outputs = StepOutputs(OP)
    step = 0
    while (max_iterations is None or step < max_iterations) and \
            _predicate_value(cond(*regroup(flat_vars, var_fmt))):
        out, new_vars = _call_func(func, flat_vars, var_fmt)
        outputs.add(out, step)
        flat_vars = check_states(OP, "loop_vars", new_vars, var_fmt, flat_vars, step)
        step += 1
    if step == 0:
        with autograd.pause():
            example, _ = _call_func(func, flat_vars, var_fmt)
        return outputs.empty(example, max_iterations or 0), flat_vars
    return outputs.stacked(rows=max_iterations), flat_vars


def _while_symbol(cond, func, flat_vars, var_fmt, max_iterations):
    if max_iterations is None:
        raise ControlFlowError(
            "while_loop: max_iterations is required on Symbols: a graph's output shapes are fixed "
            "before it runs, so per-step outputs are zero-padded to max_iterations rows")
    num_vars = len(flat_vars)

    def predicate(vars_):
        pred = cond(*regroup(vars_, var_fmt))
        if array_kind(pred) != "symbol":
            raise ControlFlowError("while_loop: cond must return a Symbol, got %s" % describe(pred))
        return pred

    # The predicate is carried as an extra loop variable and recomputed at the end of
    # each step, inside func's graph: MXNet 1.9.1's _while_loop crashes in backward
    # when its cond graph reads arrays from outside the loop (apache/mxnet#18575), so
    # its cond graph here reads nothing but that variable. A step counter is carried
    # too, to zero the padding rows and to keep unused loop variables in the graph.
    traced = {}

    def trace_func(placeholders):
        vars_, counter = placeholders[:num_vars], placeholders[num_vars + 1]
        out, new_vars = _call_func(func, vars_, var_fmt)
        flat_out, traced["out_fmt"], flat_new = flatten_traced_step(OP, out, new_vars, var_fmt,
                                                                    "loop_vars")
        traced["num_out"] = len(flat_out)
        new_counter = counter + 1
        return flat_out, flat_new + [_differentiable_predicate(predicate(flat_new), new_counter),
                                     new_counter]

    def count_unused(unused, leading, trailing):
        # Keep loop variables func ignores in its graph through the counter rather
        # than as per-step outputs, which would be padded to max_iterations rows.
        counter = trailing[-1]
        for placeholder in unused:
            size = mx.sym.cast(mx.sym.sum(mx.sym.shape_array(placeholder)), dtype="float32")
            counter = counter + 0 * size
        return leading, trailing[:-1] + [counter]

    func_graph = subgraph.trace(trace_func, num_vars + 2, "while_loop_func", keep_alive=count_unused)
    cond_graph = subgraph.trace(lambda ph: ([ph[0]], []), 1, "while_loop_cond")

    # Everything func reads from outside the loop (parameters, closure arrays) is
    # carried as an unchanged loop variable: MXNet's backward leaves the gradient of
    # an ordinary closure input unwritten when the loop runs zero times.
    outer = func_graph.outer_inputs()
    variables = func_graph.graph.get_internals()
    body = mx.sym.Group(list(func_graph.graph) + [mx.sym.identity(variables[name]) for name, _ in outer])
    num_carried = num_vars + 2 + len(outer)
    var_locs = [func_graph.placeholder_position(i) for i in range(num_vars + 2)] + \
        [func_graph.input_names.index(name) for name, _ in outer]
    initial = flat_vars + [mx.sym.cast(predicate(flat_vars), dtype="float32"), mx.sym.zeros((1,))] + \
        [source for _, source in outer]
    # MXNet's _while_loop backward also leaves a loop variable's per-step gradients
    # uninitialised when that variable's own gradient is not requested, corrupting
    # the gradients of the others. Tying all initial values together makes MXNet
    # request every one of them as soon as one is needed.
    initial = native.grad_tie(mx.sym, initial, [])
    func_locs = [0] * len(var_locs)
    for carried, position in enumerate(var_locs):
        func_locs[position] = carried
    num_out = traced["num_out"]
    subgraph.note_dynamic_shape_node()
    node = mx.sym._internal._while_loop(
        cond_graph.graph, body, *initial,
        max_iterations=max_iterations, num_out_data=num_out, num_outputs=num_out + num_carried,
        cond_input_locs=[num_vars], func_input_locs=func_locs, func_var_locs=var_locs)
    steps_run = node[num_out + num_vars + 1]
    stacked = [node[i] for i in range(num_out)]
    outputs = stacked
    if stacked:
        outputs = branch_on(steps_run > 0,
                            lambda: _zero_padding_rows(stacked, steps_run, max_iterations),
                            lambda: _zero_rows_like_one_step(func, flat_vars, var_fmt, max_iterations))
    final = [node[num_out + i] for i in range(num_vars)]
    return regroup(outputs, traced["out_fmt"]), final
