"""while_loop: imperative vs hybridized vs plain-Python reference, outputs and gradients.

Also shows where MXNet 1.9.1's own `contrib.while_loop` goes wrong (uninitialised
padding rows, backward failures, wrong parameter gradients) and that ours does not.
"""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon
from mxnet.base import MXNetError

from gluon_dyn.ops import ControlFlowError, while_loop
from conftest import (FnBlock, assert_nonzero_grads, assert_params_equal, assert_same,
                      compare_modes, dense_setup, forward_only, loss_weights, make_block,
                      make_pair, nd, run_block, run_reference)

MAX = 5
X = nd([[0.3, -0.2, 0.5]])


def check_while(fn, inputs_list, **kwargs):
    return compare_modes(fn, inputs_list, expect_ops=("_while_loop",), **kwargs)


def pad_rows(rows, like, total):
    """Stack `rows` and append zero rows up to `total` (the documented padding)."""
    stacked = [mx.nd.stack(*rows)] if rows else []
    zeros = [mx.nd.zeros((total - len(rows),) + like.shape)] if total > len(rows) else []
    return mx.nd.concat(*(stacked + zeros), dim=0)


# ------------------------------------------------------------------ imperative ---

@pytest.mark.parametrize("steps", [1, 3, 6])
def test_imperative_without_max_iterations_returns_exactly_the_steps_run(steps):
    s0 = nd([1.0, 2.0])
    s0.attach_grad()
    limit = nd([steps])
    with autograd.record():
        outs, (i, s) = while_loop(lambda i, s: i < limit,
                                  lambda i, s: ([s * 2, i], [i + 1, s * 1.5 + 1]),
                                  [nd([0.0]), s0])
        loss = (outs[0] * loss_weights(outs[0], 0)).sum() + s.sum()
    loss.backward()
    assert outs[0].shape == (steps, 2) and outs[1].shape == (steps, 1)
    assert outs[1].asnumpy().ravel().tolist() == list(range(steps))
    assert i.asscalar() == steps
    # Reference: the same loop unrolled.
    ref_s0 = nd([1.0, 2.0])
    ref_s0.attach_grad()
    with autograd.record():
        s_ref, rows = ref_s0, []
        for _ in range(steps):
            rows.append(s_ref * 2)
            s_ref = s_ref * 1.5 + 1
        ref_outs = mx.nd.stack(*rows)
        ref_loss = (ref_outs * loss_weights(ref_outs, 0)).sum() + s_ref.sum()
    ref_loss.backward()
    np.testing.assert_allclose(outs[0].asnumpy(), ref_outs.asnumpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(s.asnumpy(), s_ref.asnumpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(s0.grad.asnumpy(), ref_s0.grad.asnumpy(), rtol=1e-5, atol=1e-5)


def test_imperative_stops_on_cond_of_loop_values_not_only_counters():
    # A data-dependent trip count: double until the sum exceeds 100.
    outs, s = while_loop(lambda s: s.sum() < 100, lambda s: (s, s * 2), nd([1.0, 2.0]))
    # 3 -> 6 -> 12 -> 24 -> 48 -> 96 -> 192: six steps run.
    assert outs.shape == (6, 2)
    np.testing.assert_allclose(s.asnumpy(), [64.0, 128.0])
    np.testing.assert_allclose(outs.asnumpy()[:, 0], [1, 2, 4, 8, 16, 32])


def test_single_loop_var_comes_back_bare_and_python_bool_cond_imperatively():
    outs, s = while_loop(lambda s: bool(s.asscalar() < 3), lambda s: ([], s + 1), nd([0.0]))
    assert isinstance(s, mx.nd.NDArray) and s.asscalar() == 3
    assert outs == []


ZERO_SHAPE_MODES = pytest.mark.parametrize("np_shape", [False, True], ids=["legacy_shape",
                                                                           "np_shape"])


@ZERO_SHAPE_MODES
def test_zero_iterations_imperatively_returns_zero_rows(np_shape):
    with mx.util.np_shape(np_shape):
        s0 = nd([[1.0, 2.0, 3.0]])
        s0.attach_grad()
        calls = []

        def func(i, s):
            calls.append(1)
            return [s * 2, [i]], [i + 1, s + 1]

        with autograd.record():
            outs, (i, s) = while_loop(lambda i, s: i < 0, func, [nd([0.0]), s0])
            loss = (s * 3).sum()
        loss.backward()
        assert calls == [1]  # func traced once, to learn the outputs' structure
        assert isinstance(outs, list) and isinstance(outs[1], list)
        assert outs[0].shape == (0, 1, 3) and outs[1][0].shape == (0, 1)
        assert i.asscalar() == 0
        np.testing.assert_allclose(s.asnumpy(), s0.asnumpy())
        np.testing.assert_allclose(s0.grad.asnumpy(), 3 * np.ones((1, 3)))


def test_zero_iterations_with_max_iterations_is_all_padding():
    outs, (i, s) = while_loop(lambda i, s: i < 0, lambda i, s: ([s * 2], [i + 1, s + 1]),
                              [nd([0.0]), nd([1.0, 2.0])], max_iterations=3)
    assert outs[0].shape == (3, 2) and not outs[0].asnumpy().any()
    np.testing.assert_allclose(s.asnumpy(), [1.0, 2.0])


# ------------------------------------------------ imperative vs hybridized ---

def limited_loop_fn(use_dense, counters):
    """A loop whose trip count is min(limit, MAX): cond closes over the input `limit`.

    Per-step outputs: h2 * s, and with `counters` also the step counter i.
    """
    def fn(block, F, x, limit, s0):
        def func(i, h, s):
            h2 = F.tanh(block.dense(h)) if use_dense else h * 0.9 + s
            return [h2 * s] + ([i] if counters else []), [i + 1, h2, s * 1.1]
        outs, (i, h, s) = while_loop(lambda i, h, s: i < limit, func, [F.zeros((1,)), x, s0],
                                     max_iterations=MAX)
        return [outs, [i, h, s]]
    return fn


def limited_loop_reference(use_dense, counters):
    def reference(block, x, limit, s0):
        i, h, s, rows, steps = nd([0.0]), x, s0, [], []
        while len(rows) < MAX and i.asscalar() < limit.asscalar():
            h2 = mx.nd.tanh(block.dense(h)) if use_dense else h * 0.9 + s
            rows.append(h2 * s)
            steps.append(i)
            i, h, s = i + 1, h2, s * 1.1
        outs = [pad_rows(rows, x, MAX)] + ([pad_rows(steps, i, MAX)] if counters else [])
        return [outs, [i, h, s]]
    return reference


def check_trip_counts(use_dense, counters, limits):
    s0 = nd([[1.0, -0.5, 0.25]])
    results = check_while(limited_loop_fn(use_dense, counters),
                          [(X, nd([n]), s0) for n in limits], grad_inputs=(0, 2),
                          setup=dense_setup(), reference=limited_loop_reference(use_dense, counters))
    for n, r in zip(limits, results):
        steps = min(n, MAX)
        rows = r["outputs"][0]
        i, h = r["outputs"][-3:-1]
        assert rows.shape == (MAX, 1, 3)
        assert not rows[steps:].any(), "padding rows must be exactly zero"
        if counters:
            assert r["outputs"][1].ravel().tolist() == list(range(steps)) + [0] * (MAX - steps)
        assert i.tolist() == [steps]
        if steps:
            assert np.abs(rows[:steps]).min() > 0
            assert_nonzero_grads(r, ["input0"] + (["dense.weight"] if use_dense else []))
        else:
            np.testing.assert_allclose(h, X.asnumpy())  # h is the initial x
            assert not r["grads"]["dense.weight"].any()


TRIP_COUNT_VARIANTS = pytest.mark.parametrize(
    "use_dense, counters", [(True, False), (False, False), (True, True), (False, True)],
    ids=["dense_body-one_output", "plain_body-one_output", "dense_body-two_outputs",
         "plain_body-two_outputs"])


@TRIP_COUNT_VARIANTS
def test_trip_count_from_input_varies_between_calls_of_same_hybridized_block(use_dense, counters):
    check_trip_counts(use_dense, counters, [1, 3, 5, 7, 2])  # 7 > MAX: stops at max_iterations


@TRIP_COUNT_VARIANTS
def test_zero_trip_count_between_calls_of_same_hybridized_block(use_dense, counters):
    # cond is false from the start on some calls: all rows are padding.
    check_trip_counts(use_dense, counters, [3, 0, 1, 0, 5])


def test_two_step_outputs_backward_hybridized():
    """Minimal: two per-step outputs, one trip count, gradient w.r.t. the loop var init."""
    def fn(block, F, x):
        outs, (i, s) = while_loop(lambda i, s: i < 2, lambda i, s: ([s * 2, i], [i + 1, s * 2]),
                                  [F.zeros((1,)), x], max_iterations=4)
        return outs + [s]

    def reference(block, x):
        return [pad_rows([x * 2, x * 4], x, 4), pad_rows([nd([0.0]), nd([1.0])], nd([0.0]), 4),
                x * 4]

    check_while(fn, [(nd([1.0, 2.0]),)], grad_inputs=(0,), reference=reference)


def test_a_per_step_output_computed_only_from_comparisons_trains():
    """A per-step flag (a comparison, no gradient) beside a differentiable output: MXNet's
    loop backward needs the flag's dead gradient recognised through `where` (whose
    condition passes no gradient), or it fails its "in_attrs->size()" check."""
    def fn(block, F, x):
        def body(i, s):
            flag = F.cast(F.sum(s).reshape((1,)) > 3, dtype="float32")
            return [s * 2, flag], [i + 1, s * 2]
        outs, (i, s) = while_loop(lambda i, s: i < 3, body, [F.zeros((1,)), x], max_iterations=4)
        return [outs[0], outs[1], s]

    def reference(block, x):
        doubled = [x * 2, x * 4, x * 8]
        flags = [nd([float(v.sum().asscalar() > 3)]) for v in (x, x * 2, x * 4)]
        return [pad_rows(doubled, x, 4), pad_rows(flags, nd([0.0]), 4), x * 8]

    check_while(fn, [(nd([0.5, 0.25]),), (nd([1.0, 2.0]),)], grad_inputs=(0,), reference=reference)


@pytest.mark.parametrize("first_limit", [0, 2])
def test_zero_trip_count_hybridized_forward_only(first_limit):
    def fn(block, F, x, limit):
        outs, (i, s) = while_loop(lambda i, s: i < limit, lambda i, s: ([s * 2], [i + 1, s * 2]),
                                  [F.zeros((1,)), x], max_iterations=3)
        return [outs[0], s]

    imp, hyb = make_pair(fn)
    x = nd([0.5, -1.0])
    for limit in (first_limit, 0):
        expected, _ = forward_only(imp, (x, nd([limit])))
        got, _ = forward_only(hyb, (x, nd([limit])))
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e, rtol=1e-6)
    assert not expected[0].any() and expected[0].shape == (3, 2)


def test_static_alloc_hybridization():
    # static_alloc only: with static_shape=True MXNet 1.9.1 must know every shape before the
    # graph runs, and _while_loop's outputs have shapes only once it has run.
    def fn(block, F, x, limit):
        outs, (i, s) = while_loop(lambda i, s: i < limit, lambda i, s: ([s * 2], [i + 1, s * 2]),
                                  [F.zeros((1,)), x], max_iterations=3)
        return [outs[0], s]

    imp = make_block(fn)
    static = make_block(fn)
    static.hybridize(static_alloc=True)
    x = nd([0.5, -1.0])
    for limit in (2, 3, 1):
        expected, _ = forward_only(imp, (x, nd([limit])))
        got, _ = forward_only(static, (x, nd([limit])))
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e, rtol=1e-6)


def test_padding_is_zero_where_mxnet_padding_is_uninitialised():
    """Same loop with MXNet's contrib.while_loop: equal rows for the steps run, and ours pads
    with zeros (MXNet's padding rows are uninitialised memory, not asserted on)."""
    def body(i, s):
        return [s * 3 + 1], [i + 1, s * 2]

    for steps in (1, 3):
        def cond(i, s):
            return i < steps
        init = [nd([0.0]), nd([0.5, -1.0])]
        ours, (_, s_ours) = while_loop(cond, body, init, max_iterations=6)
        theirs, (_, s_theirs) = mx.nd.contrib.while_loop(cond, body, init, max_iterations=6)
        assert ours[0].shape == theirs[0].shape == (6, 2)
        np.testing.assert_allclose(ours[0].asnumpy()[:steps], theirs[0].asnumpy()[:steps])
        np.testing.assert_allclose(s_ours.asnumpy(), s_theirs.asnumpy())
        assert not ours[0].asnumpy()[steps:].any()

    # Hybridized, with a trip count from an input.
    def fn_ours(block, F, x, limit):
        outs, _ = while_loop(lambda i, s: i < limit, body, [F.zeros((1,)), x], max_iterations=6)
        return outs[0]

    def fn_theirs(block, F, x, limit):
        outs, _ = F.contrib.while_loop(lambda i, s: i < limit, body, [F.zeros((1,)), x],
                                       max_iterations=6)
        return outs[0]

    theirs_block = FnBlock(fn_theirs)
    theirs_block.initialize()
    theirs_block.hybridize()
    imp, hyb = make_pair(fn_ours)
    x = nd([0.5, -1.0])
    for steps in (2, 6, 1):
        expected, _ = forward_only(imp, (x, nd([steps])))
        got, _ = forward_only(hyb, (x, nd([steps])))
        (mx_out,), _ = forward_only(theirs_block, (x, nd([steps])))
        np.testing.assert_allclose(got[0], expected[0], rtol=1e-6)
        assert not got[0][steps:].any()
        np.testing.assert_allclose(got[0][:steps], mx_out[:steps], rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float64", "int32"])
def test_per_step_outputs_of_any_dtype_are_padded_in_a_graph(dtype):
    """The rows that ran are counted in float32 whatever the outputs' dtype: a float64
    per-step output once failed MXNet's type check in the graph."""
    def fn(block, F, x, limit):
        outs, _ = while_loop(lambda i, s: i < limit, lambda i, s: ([s * 3 + 1], [i + 1, s * 2]),
                             [F.zeros((1,)), x], max_iterations=4)
        return outs[0]

    imp, hyb = make_pair(fn)
    x = mx.nd.array([1, -2], dtype=dtype)
    for steps in (2, 4, 0):
        expected, _ = forward_only(imp, (x, nd([steps])))
        got, _ = forward_only(hyb, (x, nd([steps])))
        assert got[0].dtype == np.dtype(dtype) and got[0].shape == (4, 2)
        np.testing.assert_array_equal(got[0], expected[0])


def test_symbolic_without_max_iterations_raises():
    def fn(block, F, x):
        outs, s = while_loop(lambda s: F.sum(s) < 10, lambda s: (s, s * 2), x)
        return s

    block = FnBlock(fn)
    block.initialize()
    block.hybridize()
    with pytest.raises(ControlFlowError, match="max_iterations"):
        block(nd([1.0]))
    # The same block works imperatively (no max_iterations needed there).
    imperative = FnBlock(fn)
    imperative.initialize()
    assert imperative(nd([1.0])).asscalar() == 16


def test_loop_vars_nested_same_symbol_twice_unused_var_and_no_step_outputs():
    def setup(block):
        block.w = block.params.get("w", shape=(2,))

    def fn(block, F, x, limit, w):
        # loop_vars: [i, [a, b], c] with a and b the same symbol; c is never read by func
        # (it is overwritten), and func has no per-step outputs.
        def func(i, ab, c):
            a, b = ab
            return [], [i + 1, [a * w + b, b * 0.5], a * 2]
        outs, (i, (a, b), c) = while_loop(lambda i, ab, c: i < limit, func,
                                          [F.zeros((1,)), [x, x], x * 3], max_iterations=4)
        assert outs == []
        return [a, b, c]

    def reference(block, x, limit):
        w, n = block.w.data(), min(int(limit.asscalar()), 4)
        a, b, c = x, x, x * 3
        for _ in range(n):
            a, b, c = a * w + b, b * 0.5, a * 2
        return [a, b, c]

    x = nd([0.5, -1.5])
    results = check_while(fn, [(x, nd([n])) for n in (2, 0, 4, 1)], grad_inputs=(0,),
                          setup=setup, reference=reference)
    assert_nonzero_grads(results[0])


def test_cond_reading_a_parameter_and_outputs_of_several_shapes():
    def setup(block):
        block.dense = gluon.nn.Dense(2, in_units=2, flatten=False)
        block.scale = block.params.get("scale", shape=(1,), init=mx.init.Constant(1.0))

    def fn(block, F, x, scale):
        def cond(i, h):
            return F.sum(F.abs(h)) * scale < 6
        def func(i, h):
            h2 = h * 1.6 + block.dense(h) * 0.5
            return [h2, F.sum(h2), [i]], [i + 1, h2]
        outs, (i, h) = while_loop(cond, func, [F.zeros((1,)), x], max_iterations=6)
        return [outs, h, i]

    def reference(block, x):
        scale = block.scale.data()
        i, h, rows = nd([0.0]), x, [[], [], []]
        while len(rows[0]) < 6 and (mx.nd.sum(mx.nd.abs(h)) * scale).asscalar() < 6:
            h = h * 1.6 + block.dense(h) * 0.5
            for k, v in enumerate((h, mx.nd.sum(h), i)):
                rows[k].append(v)
            i = i + 1
        return [[pad_rows(rows[0], x, 6), pad_rows(rows[1], nd([0]), 6),
                 [pad_rows(rows[2], i, 6)]], h, i]

    results = check_while(fn, [(nd([[0.2, 0.1]]),), (nd([[1.0, 2.0]]),), (nd([[2.0, 2.0]]),)],
                          grad_inputs=(0,), setup=setup, reference=reference)
    steps = [int(r["outputs"][-1][0]) for r in results]
    assert results[0]["structure"] == [[None, None, [None]], None, None]
    assert steps == [6, 2, 1], "the inputs must give different trip counts, one stopped by MAX"


# ------------------------------------------------ the training test ---

def dense_loop_fn(wl):
    """The training block: Dense in the body, loop var inits without gradient, cond reads `limit`."""
    def fn(block, F, x, limit):
        def func(i, h):
            h2 = F.tanh(block.dense(h))
            return [h2], [i + 1, h2]
        outs, (i, h) = wl(F)(lambda i, h: i < limit, func, [F.zeros((1,)), x],
                             max_iterations=MAX)
        return [outs[0], h]
    return fn


def dense_loop_reference(block, x, limit):
    h, rows = x, []
    for _ in range(min(int(limit.asscalar()), MAX)):
        h = mx.nd.tanh(block.dense(h))
        rows.append(h)
    return [pad_rows(rows, x, MAX), h]


def ours(F):
    return while_loop


def mxnets(F):
    return F.contrib.while_loop


def test_training_with_dense_in_body_matches_imperative():
    fn = dense_loop_fn(ours)
    # Parameter gradients, hybridized vs imperative vs unrolled reference; x has no gradient.
    results = check_while(fn, [(X, nd([n])) for n in (3, 1, 5)], setup=dense_setup(),
                          reference=dense_loop_reference)
    assert sorted(results[0]["grads"]) == ["dense.bias", "dense.weight"]
    assert_nonzero_grads(results[0])
    # A few SGD steps in both modes keep the parameters equal.
    imp, hyb = make_pair(fn, dense_setup())
    trainers = [gluon.Trainer(b.collect_params(), "sgd", {"learning_rate": 0.5}) for b in (imp, hyb)]
    before = imp.dense.weight.data().asnumpy()
    for limit in (3, 1, 5, 2, 4):
        for block, trainer in zip((imp, hyb), trainers):
            with autograd.record():
                outs, h = block(X, nd([limit]))
                loss = (outs * outs).sum() + (h * h).sum()
            loss.backward()
            trainer.step(1)
        assert_params_equal(hyb, imp)
    assert not np.allclose(imp.dense.weight.data().asnumpy(), before), "training changed nothing"


def test_mxnet_while_loop_fails_the_training_check_where_ours_passes():
    # 1. cond reads the outer array `limit`: MXNet's backward raises, ours matches.
    inputs = (X, nd([3]))
    imp = make_pair(dense_loop_fn(ours), dense_setup())[0]
    expected = run_block(imp, inputs)
    theirs = make_pair(dense_loop_fn(mxnets), dense_setup())[1]
    with pytest.raises(MXNetError):
        run_block(theirs, inputs)
    our_hyb = make_pair(dense_loop_fn(ours), dense_setup())[1]
    assert_same(run_block(our_hyb, inputs), expected)

    # 2. cond reads only loop vars, a loop var init has no gradient: MXNet's parameter
    # gradient is wrong (uninitialised per-step gradients), ours is right.
    def setup(block):
        block.w = block.params.get("w", shape=(1,), init=mx.init.Constant(2.0))

    def make_fn(wl):
        def fn(block, F, x, w):
            outs, (i, s) = wl(F)(lambda i, s: i < 4, lambda i, s: ([s * w], [i + 1, s * w]),
                                 [F.zeros((1,)), x], max_iterations=4)
            return s
        return fn

    x = nd([1.0])
    ours_imp, ours_hyb = make_pair(make_fn(ours), setup)
    theirs_hyb = make_pair(make_fn(mxnets), setup)[1]
    for block in (ours_imp, ours_hyb, theirs_hyb):
        block.w.set_data(nd([2.0]))
    w_weight = loss_weights(nd([0.0]), 0).asscalar()  # the loss is w_weight * s = w_weight * w^4
    expected_grad = w_weight * 4 * 2.0 ** 3
    r_imp = run_block(ours_imp, (x,))
    r_hyb = run_block(ours_hyb, (x,))
    np.testing.assert_allclose(r_imp["grads"]["w"], [expected_grad], rtol=1e-5)
    assert_same(r_hyb, r_imp)
    try:
        r_theirs = run_block(theirs_hyb, (x,))
    except MXNetError:
        pass
    else:
        np.testing.assert_allclose(r_theirs["outputs"][0], [16.0])  # forward is right...
        assert not np.allclose(r_theirs["grads"]["w"], [expected_grad], rtol=1e-5, atol=1e-5)


def test_mxnet_while_loop_wrong_dense_gradients_when_cond_reads_no_outer_array():
    def make_fn(wl):
        def fn(block, F, x):
            def func(i, h):
                h2 = F.tanh(block.dense(h))
                return [h2], [i + 1, h2]
            outs, (i, h) = wl(F)(lambda i, h: i < 3, func, [F.zeros((1,)), x], max_iterations=MAX)
            return h
        return fn

    imp, hyb = make_pair(make_fn(ours), dense_setup())
    theirs = make_pair(make_fn(mxnets), dense_setup())[1]
    expected = run_block(imp, (X,))
    assert_same(run_block(hyb, (X,)), expected)
    reference = run_reference(lambda b, x: dense_loop_reference(b, x, nd([3]))[1], imp, (X,))
    assert_same(expected, reference)
    try:
        got = run_block(theirs, (X,))
    except MXNetError:
        return
    assert not all(np.allclose(got["grads"][k], expected["grads"][k], rtol=1e-5, atol=1e-5)
                   for k in expected["grads"])
