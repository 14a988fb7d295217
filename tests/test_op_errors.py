"""Mistakes in using cond/foreach/while_loop raise errors that say what is wrong."""
import mxnet as mx
import numpy as np
import pytest

from gluon_dyn.ops import ControlFlowError, cond, foreach, while_loop
from conftest import make_block, nd

X = nd([1.0, 2.0])
XS = nd(np.arange(8, dtype=np.float32).reshape(4, 2))

# How an operator error starts: the operator and the file:line of its call here.
AT = {op: op + r" at .*test_op_errors\.py:\d+: " for op in ("cond", "while_loop", "foreach")}


def hybrid_call(fn, *inputs):
    """Call `fn(block, F, *inputs)` as a hybridized block (so the operators see Symbols)."""
    block = make_block(fn, hybridize=True)
    return block(*inputs)


# ------------------------------------------------ cond: branches disagree ---

def test_branches_with_different_output_counts_symbolic():
    def fn(block, F, p, x):
        return cond(p, lambda: [x, x * 2], lambda: x + 1)

    with pytest.raises(ControlFlowError,
                       match=AT["cond"] + r"then_func returns 2 outputs .* but else_func returns 1"):
        hybrid_call(fn, nd([1]), X)


def test_branches_with_different_nesting_symbolic():
    def fn(block, F, p, x):
        return cond(p, lambda: [x, [x * 2]], lambda: [x, x * 3])

    with pytest.raises(ControlFlowError, match=r"then_func returns 2 outputs structured as "
                                               r"\[array, \[array\]\] but else_func returns 2 "
                                               r"structured as \[array, array\]"):
        hybrid_call(fn, nd([1]), X)


@pytest.mark.parametrize("mode", ["imperative", "symbolic"])
def test_branches_returning_nothing(mode):
    def fn(block, F, p, x):
        return cond(p, lambda: [], lambda: [])

    with pytest.raises(ControlFlowError, match=AT["cond"] + "then_func returns no outputs; cond needs at "
                                               "least one"):
        if mode == "symbolic":
            hybrid_call(fn, nd([1]), X)
        else:
            fn(None, mx.nd, nd([1]), X)


@pytest.mark.parametrize("mode", ["imperative", "symbolic"])
def test_branch_returning_python_float(mode):
    if mode == "imperative":
        with pytest.raises(ControlFlowError,
                           match=AT["cond"] + r"then_func's output must be an NDArray, a Symbol .* "
                                 r"got float 1\.5"):
            cond(nd([1]), lambda: 1.5, lambda: X)
        return

    def fn(block, F, p, x):
        return cond(p, lambda: [x, [x * 2]], lambda: [x, [2.5]])

    with pytest.raises(ControlFlowError,
                       match=AT["cond"] + r"else_func's output\[1\]\[0\] must be .* got float 2\.5"):
        hybrid_call(fn, nd([1]), X)


# ---------------------------------------------------------- not callable ---

@pytest.mark.parametrize("call, message", [
    (lambda: cond(nd([1]), 3, lambda: X), r"cond: then_func must be callable, got int 3"),
    (lambda: cond(nd([1]), lambda: X, None), r"cond: else_func must be callable, got NoneType"),
    (lambda: foreach("body", XS, []), r"foreach: body must be callable, got str 'body'"),
    (lambda: while_loop(1, lambda i: ([], i), [X]), r"while_loop: cond must be callable, got int 1"),
    (lambda: while_loop(lambda i: i, [1], [X]), r"while_loop: func must be callable, got list"),
], ids=["then_func", "else_func", "body", "cond", "func"])
def test_non_callable_arguments(call, message):
    with pytest.raises(TypeError, match=message):
        call()


# ------------------------------------------------- non-scalar predicates ---

def test_cond_non_scalar_predicate_imperative():
    with pytest.raises(ControlFlowError, match=AT["cond"] + r"pred must be a scalar .* shape \(2,\)"):
        cond(nd([1, 0]), lambda: X, lambda: X)


def test_while_loop_non_scalar_predicate_imperative():
    with pytest.raises(ControlFlowError,
                       match=AT["while_loop"] + r"cond must return a scalar .* shape \(2,\)"):
        while_loop(lambda i: i < 3, lambda i: ([], i + 1), [X])


def test_cond_python_predicate():
    with pytest.raises(ControlFlowError, match=AT["cond"] + r"pred must be an NDArray or a Symbol.*"
                                               r"bool True.*Python `if`"):
        cond(True, lambda: X, lambda: X)


def test_while_loop_cond_returning_a_python_float():
    with pytest.raises(ControlFlowError,
                       match=AT["while_loop"] + r"cond must return an NDArray of one element, got float"):
        while_loop(lambda i: 1.5, lambda i: ([], i + 1), [nd([0])])


# -------------------------------------------- bodies returning the wrong shape ---

def test_foreach_states_structure_differs_imperative():
    with pytest.raises(ControlFlowError,
                       match=AT["foreach"] + r"at step 0 the body returned state structured as "
                             r"\[array, array\]; .* initial values, \[array\]"):
        foreach(lambda d, s: (d, [s[0], s[0]]), XS, [X])


def test_foreach_states_structure_differs_symbolic():
    def fn(block, F, xs, h):
        return foreach(lambda d, s: (d, [s[0], s[0]]), xs, [h])

    with pytest.raises(ControlFlowError, match=AT["foreach"] + r".*states structured as "
                                               r"\[array, array\].*structure.*\[array\]"):
        hybrid_call(fn, XS, X)


def test_while_func_returns_different_number_of_loop_vars_imperative():
    with pytest.raises(ControlFlowError,
                       match=AT["while_loop"] + r"at step 0 the body returned loop_vars structured as "
                             r"\[array, array, array\].*\[array, array\]"):
        while_loop(lambda i, s: i < 3, lambda i, s: ([], [i + 1, s, s]), [nd([0]), X])


def test_while_func_returns_different_number_of_loop_vars_symbolic():
    def fn(block, F, x):
        return while_loop(lambda i, s: i < 3, lambda i, s: ([], [i + 1, s, s]),
                          [F.zeros((1,)), x], max_iterations=3)[1]

    with pytest.raises(ControlFlowError, match=AT["while_loop"] + r".*loop_vars structured as "
                                               r"\[array, array, array\].*\[array, array\]"):
        hybrid_call(fn, X)


def test_while_func_not_returning_a_pair():
    with pytest.raises(ControlFlowError, match=AT["while_loop"] + r"func must return a pair"):
        while_loop(lambda i: i < 3, lambda i: i + 1, [nd([0])])


def test_foreach_body_not_returning_a_pair():
    with pytest.raises(ControlFlowError, match=AT["foreach"] + r"body must return a pair"):
        foreach(lambda d, s: d, XS, [])


def test_foreach_state_changes_shape_between_steps():
    with pytest.raises(ControlFlowError,
                       match=AT["foreach"] + r"state 0 changed from shape \(2,\) float32 to shape \(4,\) "
                             r"float32 at step 0"):
        foreach(lambda d, s: (d, mx.nd.concat(s, d, dim=0)), XS, X)


def test_foreach_state_changes_dtype_between_steps():
    with pytest.raises(ControlFlowError, match=r"state 0 changed from shape \(2,\) float32 to "
                                               r"shape \(2,\) float64"):
        foreach(lambda d, s: (d, s.astype("float64")), XS, X)


def test_while_loop_var_changes_shape_between_steps():
    def func(i, s):
        grown = mx.nd.concat(s, i, dim=0) if i.asscalar() == 1 else s * 1
        return [], [i + 1, grown]

    with pytest.raises(ControlFlowError, match=AT["while_loop"] + r"loop_vars 1 changed from shape \(2,\) "
                                               r"float32 to shape \(3,\) float32 at step 1"):
        while_loop(lambda i, s: i < 3, func, [nd([0]), X])


def test_step_output_changes_shape_between_steps():
    with pytest.raises(ControlFlowError,
                       match=AT["foreach"] + r"output 0 has shape \(2,\) float32 at step 1 but \(1,\) "
                             r"float32 at step 0"):
        foreach(lambda d, s: (mx.nd.ones((int(s.asscalar()),)), s + 1), XS, nd([1.0]))


# ------------------------------------------------------------- foreach data ---

def test_foreach_data_of_different_lengths():
    with pytest.raises(ControlFlowError, match=AT["foreach"] + r"data 1 has 3 rows on axis 0 but data 0 "
                                               r"has 4"):
        foreach(lambda d, s: (d[0] + d[1], s), [XS, XS[:3]], [])


def test_foreach_nested_data_of_different_lengths():
    with pytest.raises(ControlFlowError, match=r"data 2 has 2 rows on axis 0 but data 0 has 4"):
        foreach(lambda d, s: (d[0], s), [XS, [XS, XS[:2]]], [])


def test_foreach_empty_data_list():
    with pytest.raises(ControlFlowError, match=AT["foreach"] + r"data must contain at least one array"):
        foreach(lambda d, s: (d, s), [], [])


def test_foreach_scalar_data():
    with pytest.raises(ControlFlowError, match=AT["foreach"] + r"data 0 is a scalar"):
        foreach(lambda d, s: (d, s), mx.nd.array(np.float32(1.0).reshape(())), [])


def test_while_loop_empty_loop_vars():
    with pytest.raises(ControlFlowError, match=AT["while_loop"] + r"loop_vars must contain at least one"):
        while_loop(lambda: nd([1]), lambda: ([], []), [])


@pytest.mark.parametrize("bad", [-1, 2.5, True])
def test_while_loop_bad_max_iterations(bad):
    with pytest.raises(ControlFlowError, match=r"max_iterations must be a non-negative integer"):
        while_loop(lambda i: i < 3, lambda i: ([], i + 1), [nd([0])], max_iterations=bad)


def test_non_array_in_init_states_names_position():
    with pytest.raises(ControlFlowError, match=AT["foreach"] + r"init_states\[1\]\[0\] must be an NDArray"):
        foreach(lambda d, s: (d, s), XS, [X, [3]])


# ------------------------------------------------- NDArrays mixed with Symbols ---

def test_foreach_mixing_ndarray_and_symbol():
    with pytest.raises(ControlFlowError, match=AT["foreach"] + r"inputs mix NDArrays and Symbols"):
        foreach(lambda d, s: (d, s), XS, [mx.sym.var("s")])


def test_while_loop_mixing_ndarray_and_symbol():
    with pytest.raises(ControlFlowError, match=AT["while_loop"] + r"inputs mix NDArrays and Symbols"):
        while_loop(lambda i, s: i < 3, lambda i, s: ([], [i + 1, s]), [nd([0]), mx.sym.var("s")],
                   max_iterations=3)


def test_symbolic_while_loop_cond_returning_ndarray():
    def fn(block, F, x):
        return while_loop(lambda s: nd([1]), lambda s: ([], s + 1), x, max_iterations=2)[1]

    with pytest.raises(ControlFlowError, match=AT["while_loop"] + r"cond must return a Symbol, got NDArray"):
        hybrid_call(fn, X)


def test_cond_symbol_pred_with_ndarray_branch_output():
    # Inside hybrid_forward, a branch that returns a (closed-over) NDArray.
    constant = nd([5.0, 6.0])

    def fn(block, F, p, x):
        return cond(p, lambda: constant, lambda: x)

    with pytest.raises((ControlFlowError, TypeError), match="^" + AT["cond"] + r".*(NDArray.*Symbol|Symbol"
                                                            r".*NDArray)"):
        hybrid_call(fn, nd([1]), X)


def test_cond_ndarray_pred_with_symbol_branch_output():
    a = mx.sym.var("a")
    with pytest.raises((ControlFlowError, TypeError), match="^" + AT["cond"] + r".*(NDArray.*Symbol|Symbol"
                                                            r".*NDArray)"):
        cond(nd([1]), lambda: a * 2, lambda: a)


def test_symbolic_foreach_with_step_outputs_and_cond_inside_under_plain_hybridize():
    # Plain hybridize builds the graph before any shape is known: the rows are unknown.
    def fn(block, F, xs, h):
        return foreach(lambda x, s: (cond(F.sum(x) > 0, lambda: s * 2, lambda: s), s + x), xs, h)[0]

    with pytest.raises(ControlFlowError, match=AT["foreach"] + r"on Symbols, a body that returns per-step "
                                               r"outputs and contains cond or while_loop needs the "
                                               r"number of rows.*hybridize\(dynamic=True\) knows"):
        hybrid_call(fn, XS, X)


def test_symbolic_branches_with_different_output_shapes_name_output_and_line():
    def fn(block, F, p, x):
        return cond(p, lambda: x * 2, lambda: F.sum(x, axis=0))

    with pytest.raises(ControlFlowError, match=AT["cond"] + r"output 0 is shape "
                                               r"\(2, 3\) float32 in then_func but shape \(3,\) "
                                               r"float32 in else_func"):
        hybrid_call(fn, nd([1]), mx.nd.ones((2, 3)))


def test_symbolic_branches_with_different_dtypes_inside_a_loop_body():
    def fn(block, F, x, h):
        def body(row, states):
            new = cond(F.sum(row) > 0, lambda: states[0] + row,
                       lambda: F.cast(states[0], dtype="float64"))
            return [], [new]
        return foreach(body, x, [h])[1][0]

    with pytest.raises(ControlFlowError, match=r"output 0 is shape \(2, 3\) float32 in then_func "
                                               r"but shape \(2, 3\) float64 in else_func"):
        hybrid_call(fn, mx.nd.ones((4, 2, 3)), mx.nd.ones((2, 3)))
