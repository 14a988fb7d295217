"""while_loop: repeat a body while a tensor predicate holds, stacking per-step outputs."""
import mxnet as mx
from mxnet import autograd

from .. import native
from . import numpy_arrays, subgraph
from .steps import StepOutputs, check_states, flatten_traced_step
from .structure import (ControlFlowError, array_kind, check_callable, check_name, common_kind,
                        describe, flatten, located, regroup, unpack_body_result)

OP = "while_loop"


@located
def while_loop(cond, func, loop_vars, max_iterations=None, name="while_loop"):
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

    `name` prefixes the subgraphs' names (`<name>_cond`, `<name>_func`), as in
    `mx.sym.contrib.while_loop`.
    """
    check_callable(cond, OP, "cond")
    check_callable(func, OP, "func")
    check_name(name, OP)
    single = array_kind(loop_vars) is not None
    cond, func, var_kinds = _on_legacy_views(cond, func, [loop_vars] if single else loop_vars)
    loop_vars = numpy_arrays.as_legacy(loop_vars)
    flat_vars, var_fmt = flatten([loop_vars] if single else loop_vars, OP, "loop_vars")
    if not flat_vars:
        raise ControlFlowError("while_loop: loop_vars must contain at least one array")
    kind = common_kind(flat_vars, OP)
    if max_iterations is not None:
        max_iterations = _as_iteration_count(max_iterations)
    if kind == "ndarray":
        outputs, final = _while_ndarray(cond, func, flat_vars, var_fmt, max_iterations)
    else:
        outputs, final = _while_symbol(cond, func, flat_vars, var_fmt, max_iterations, name)
    final = numpy_arrays.restored(regroup(final, var_fmt), var_kinds)
    outputs = numpy_arrays.restored(outputs, (func.kinds or [None])[0])
    return outputs, final[0] if single else final


def _on_legacy_views(cond, func, args):
    """`cond` and `func` taking the loop variables as legacy views (numpy_arrays.py),
    giving them to the user's functions as the kinds `args` (the loop variables, as
    a list) has; and those kinds."""
    var_kinds = numpy_arrays.kinds(list(args))

    def user_cond(*vars_):
        return numpy_arrays.truth(cond(*numpy_arrays.restored(list(vars_), var_kinds)))
    return user_cond, numpy_arrays.Returned(
        lambda *vars_: func(*numpy_arrays.restored(list(vars_), var_kinds))), var_kinds


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


def _select(flag, new, old):
    """`new` where the one-element `flag` is nonzero, else `old` (any shapes, any dtype)."""
    flat_old = mx.sym.reshape(old, shape=(-1,))
    mask = mx.sym.broadcast_like(flag, flat_old)
    return mx.sym.reshape_like(mx.sym.where(mask, mx.sym.reshape(new, shape=(-1,)), flat_old), old)


def _zero_padding(stacked, count, max_iterations):
    """Each of `stacked` (per-step outputs of max_iterations rows) with the rows from
    `count` on, uninitialised memory in MXNet's output, replaced by zeros.

    Each row is taken from the output extended by one zero row: itself if its step
    ran, else the zero row. A product with a mask would turn NaN garbage into NaN,
    and `where` or `reshape_like`, whose backward nodes have fewer outputs than
    their forward nodes have inputs, fail the backward of MXNet's executor
    (Symbol.bind, Module) on a graph with dynamic shapes ("in_array.size() ==
    out_array.size()"). The row indices come from the output itself: _while_loop's
    outputs have no shape until it runs, and that executor fails with "Shape is
    unknown" on a broadcast between a shape it knows, such as
    arange(max_iterations)'s, and one it does not.
    """
    # In the output's dtype, cast to the counter's (float32, as its zeros): a float64
    # or integer output's rows compared with it fail MXNet's type check.
    rows = mx.sym.cast(mx.sym.contrib.arange_like(stacked[0], axis=0), dtype="float32")
    ran = mx.sym.broadcast_lesser(rows, count)
    index = mx.sym.BlockGrad((rows - max_iterations) * ran + max_iterations)
    return [mx.sym.take(mx.sym.concat(
        output, mx.sym.zeros_like(mx.sym.slice_axis(output, axis=0, begin=0, end=1)), dim=0),
        index, axis=0) for output in stacked]


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


def _while_symbol(cond, func, flat_vars, var_fmt, max_iterations, name):
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

    # Carried besides the loop variables, at fixed positions after them:
    #  - the predicate, recomputed at the end of each step inside func's graph:
    #    MXNet 1.9.1's _while_loop crashes in backward when its cond graph reads
    #    arrays from outside the loop (apache/mxnet#18575), so its cond graph here
    #    reads nothing but carried values;
    #  - a step counter, to zero the padding rows and keep unused variables alive;
    #  - a first-step flag: after zero steps MXNet's per-step outputs have no shape
    #    and its backward fails, so with per-step outputs the loop always runs one
    #    step, which leaves everything unchanged when the predicate was false.
    PRED, COUNT, FIRST = num_vars, num_vars + 1, num_vars + 2
    traced = {}

    def trace_func(placeholders):
        vars_, taken = placeholders[:num_vars], placeholders[PRED]
        out, new_vars = _call_func(func, vars_, var_fmt)
        flat_out, traced["out_fmt"], flat_new = flatten_traced_step(OP, out, new_vars, var_fmt,
                                                                    "loop_vars")
        traced["num_out"] = len(flat_out)
        step = mx.sym.ones((1,))
        if flat_out:
            flat_new = [_select(taken, new, old) for new, old in zip(flat_new, vars_)]
            flat_out = [_select(taken, o, mx.sym.zeros_like(o)) for o in flat_out]
            step = taken
        carried = [mx.sym.cast(predicate(flat_new), dtype="float32"), placeholders[COUNT] + step]
        if flat_out:
            carried.append(0 * placeholders[FIRST])
        return flat_out, flat_new + carried

    def count_unused(unused, leading, trailing):
        # Keep loop variables func ignores in its graph through the counter rather
        # than as per-step outputs, which would be padded to max_iterations rows.
        # Without per-step outputs the first-step flag is not carried at all.
        position = num_vars + 1
        counter = trailing[position]
        for index, placeholder in unused:
            if index == FIRST and not traced["num_out"]:
                continue
            size = mx.sym.cast(mx.sym.sum(mx.sym.shape_array(placeholder)), dtype="float32")
            counter = counter + 0 * size
        return leading, trailing[:position] + [counter] + trailing[position + 1:]

    func_graph = subgraph.trace(trace_func, num_vars + 3, name + "_func", keep_alive=count_unused)
    num_out = traced["num_out"]
    num_own = num_vars + (3 if num_out else 2)
    if num_out:
        cond_graph = subgraph.trace(lambda ph: ([mx.sym.broadcast_maximum(ph[0], ph[1])], []), 2,
                                    name + "_cond")
    else:
        cond_graph = subgraph.trace(lambda ph: ([ph[0]], []), 1, name + "_cond")

    # Everything func reads from outside the loop (parameters, closure arrays) is
    # carried as an unchanged loop variable: MXNet's backward leaves the gradient of
    # an ordinary closure input unwritten when the loop runs zero times.
    outer = func_graph.outer_inputs()
    runs = mx.sym.cast(predicate(flat_vars), dtype="float32")   # the body runs at least once
    subgraph.note_conditional_use(runs, [name for name, _ in outer])
    variables = func_graph.graph.get_internals()
    body = mx.sym.Group(list(func_graph.graph) + [mx.sym.identity(variables[name]) for name, _ in outer])
    num_carried = num_own + len(outer)
    var_locs = [func_graph.placeholder_position(i) for i in range(num_own)] + \
        [func_graph.input_names.index(name) for name, _ in outer]
    initial = flat_vars + [runs, mx.sym.zeros((1,)),
                           mx.sym.ones((1,))][:num_own - num_vars] + [source for _, source in outer]
    # MXNet's _while_loop backward also leaves a loop variable's per-step gradients
    # uninitialised when that variable's own gradient is not requested, corrupting
    # the gradients of the others. Tying all initial values together makes MXNet
    # request every one of them as soon as one is needed.
    initial = native.grad_tie(mx.sym, initial, [])
    func_locs = [0] * len(var_locs)
    for carried, position in enumerate(var_locs):
        func_locs[position] = carried
    subgraph.note_dynamic_shape_node()
    node = mx.sym._internal._while_loop(
        cond_graph.graph, body, *initial,
        max_iterations=max_iterations, num_out_data=num_out, num_outputs=num_out + num_carried,
        cond_input_locs=[PRED, FIRST][:1 + bool(num_out)], func_input_locs=func_locs,
        func_var_locs=var_locs)
    outputs = []
    if num_out:
        outputs = _zero_padding([node[i] for i in range(num_out)], node[num_out + COUNT],
                                max_iterations)
    final = [node[num_out + i] for i in range(num_vars)]
    return regroup(outputs, traced["out_fmt"]), final
