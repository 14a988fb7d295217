"""cond: imperative vs hybridized vs plain-Python reference, outputs and gradients."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

from gluon_dyn.ops import cond
from conftest import (assert_nonzero_grads, compare_modes, dense_setup, forward_only, loss_weights,
                      make_pair, nd)

POS = nd([[0.5, 1.0, -0.2], [0.3, 0.1, 0.4]])
NEG = nd([[-0.5, 0.2, -0.7], [0.1, -0.3, -0.4]])
Y = nd([[0.2, -0.1, 0.3], [0.6, 0.5, -0.8]])


def check_cond(fn, inputs_list, **kwargs):
    return compare_modes(fn, inputs_list, expect_ops=("_cond",), **kwargs)


def setup_dense_and_w(block):
    block.dense = gluon.nn.Dense(3, in_units=3, flatten=False)
    block.w = block.params.get("w", shape=(3,))


def test_both_branches_pred_from_inputs_with_dense_and_closures():
    def fn(block, F, x, y, w):
        pred = F.sum(x) > 0  # computed from the inputs
        return cond(pred,
                    lambda: block.dense(x) * F.broadcast_mul(y, w.reshape((1, 3))),
                    lambda: F.tanh(block.dense(y)) - F.broadcast_add(x, w.reshape((1, 3))))

    def reference(block, x, y):
        w = block.w.data().reshape((1, 3))
        if x.sum().asscalar() > 0:
            return block.dense(x) * (y * w)
        return mx.nd.tanh(block.dense(y)) - (x + w)

    results = check_cond(fn, [(POS, Y), (NEG, Y), (POS, Y)], grad_inputs=(0, 1),
                         setup=setup_dense_and_w, reference=reference)
    for r in results:
        assert_nonzero_grads(r)
    # The two branches really ran: the then-branch result for POS differs from the else-branch one.
    assert not np.allclose(results[0]["outputs"][0], results[1]["outputs"][0])


def test_untaken_branch_gives_zero_gradient_to_its_own_parameters():
    def setup(block):
        block.a = gluon.nn.Dense(3, in_units=3, flatten=False)
        block.b = gluon.nn.Dense(3, in_units=3, flatten=False)

    def fn(block, F, p, x):
        return cond(p, lambda: block.a(x), lambda: block.b(x) * 2)

    def reference(block, p, x):
        return block.a(x) if p.asscalar() else block.b(x) * 2

    then_run, else_run = check_cond(fn, [(nd([1]), POS), (nd([0]), POS)], grad_inputs=(1,),
                                    setup=setup, reference=reference)
    a_weight = [k for k in then_run["grads"] if k.startswith("a.")]
    b_weight = [k for k in then_run["grads"] if k.startswith("b.")]
    assert a_weight and b_weight
    for k in a_weight:
        assert np.abs(then_run["grads"][k]).sum() > 0 and not else_run["grads"][k].any()
    for k in b_weight:
        assert np.abs(else_run["grads"][k]).sum() > 0 and not then_run["grads"][k].any()


def test_pred_computed_inside_the_graph_from_a_dense_output():
    def fn(block, F, x):
        h = block.dense(x)
        return cond(F.mean(h) > 0.1, lambda: F.relu(h) * x, lambda: F.sigmoid(h) + x * x)

    def reference(block, x):
        h = block.dense(x)
        return mx.nd.relu(h) * x if h.mean().asscalar() > 0.1 else mx.nd.sigmoid(h) + x * x

    imp, hyb = make_pair(fn, dense_setup())
    preds = set()
    inputs = [POS * 3, NEG * 3, POS * -3, NEG * -3]
    with autograd.pause():
        for x in inputs:
            preds.add(bool(imp.dense(x).mean().asscalar() > 0.1))
    assert preds == {True, False}, "inputs must exercise both branches"
    check_cond(fn, [(x,) for x in inputs], grad_inputs=(0,), setup=dense_setup(),
               reference=reference)


def test_multiple_and_nested_list_outputs():
    def fn(block, F, p, x, y):
        return cond(p,
                    lambda: [x * y, [F.exp(x), y * 3], x + 1],
                    lambda: [x - y, [y * y, F.sin(x)], y + 2])

    def reference(block, p, x, y):
        if p.asscalar():
            return [x * y, [mx.nd.exp(x), y * 3], x + 1]
        return [x - y, [y * y, mx.nd.sin(x)], y + 2]

    for r in check_cond(fn, [(nd([1]), POS, Y), (nd([0]), POS, Y)], grad_inputs=(1, 2),
                        reference=reference):
        assert r["structure"] == [None, [None, None], None]
        assert_nonzero_grads(r)


def test_branches_returning_inputs_and_repeated_outputs_unchanged():
    # A branch may return an outer array as is, or the same array twice.
    def fn(block, F, p, x, y):
        return cond(p, lambda: [x, x], lambda: [y * 2, y])

    def reference(block, p, x, y):
        return [x, x] if p.asscalar() else [y * 2, y]

    check_cond(fn, [(nd([1]), POS, Y), (nd([0]), POS, Y)], grad_inputs=(1, 2),
               reference=reference)


def test_branch_closing_over_parameter_only():
    def setup(block):
        block.w = block.params.get("w", shape=(2, 3))

    def fn(block, F, p, x, w):
        return cond(p, lambda: w * 2, lambda: w * x)

    def reference(block, p, x):
        w = block.w.data()
        return w * 2 if p.asscalar() else w * x

    check_cond(fn, [(nd([0]), POS), (nd([5]), POS)], grad_inputs=(1,), setup=setup,
               reference=reference)


@pytest.mark.parametrize("pred_value", [-2.0, 0.0, 0.5])
def test_nonzero_pred_means_true(pred_value):
    # Any nonzero value selects then_func, in both modes.
    def fn(block, F, p, x):
        return cond(p, lambda: x + 1, lambda: x - 1)

    imp, hyb = make_pair(fn)
    expected = POS.asnumpy() + (1 if pred_value != 0 else -1)
    for block in (imp, hyb):
        outs, _ = forward_only(block, (nd([pred_value]), POS))
        np.testing.assert_allclose(outs[0], expected, rtol=1e-6)


@pytest.mark.parametrize("dtype, pred_value", [("float64", 1e-50), ("float64", 0.0),
                                               ("float64", -3.0), ("int32", 7), ("int32", 0)])
def test_a_pred_and_branches_of_any_dtype_run_in_a_graph(dtype, pred_value):
    """MXNet's _cond types its predicate float32: a float64 or integer pred failed its
    type check (MXNet's own contrib.cond too); 1e-50 is nonzero in float64 and zero
    in float32."""
    def fn(block, F, p, x):
        return cond(p, lambda: x * 2, lambda: x - 1)

    imp, hyb = make_pair(fn)
    x = mx.nd.array([[3, -1], [2, 5]], dtype=dtype)
    p = mx.nd.array([pred_value], dtype=dtype)
    expected = x.asnumpy() * 2 if pred_value != 0 else x.asnumpy() - 1
    for block in (imp, hyb):
        outs, _ = forward_only(block, (p, x))
        assert outs[0].dtype == np.dtype(dtype)
        np.testing.assert_array_equal(outs[0], expected)


def test_only_the_chosen_branch_runs_imperatively():
    calls = []

    def then_f():
        calls.append("then")
        return nd([1.0])

    def else_f():
        calls.append("else")
        return nd([2.0])

    assert cond(nd([1]), then_f, else_f).asnumpy().tolist() == [1.0]
    assert cond(nd([0]), then_f, else_f).asnumpy().tolist() == [2.0]
    assert calls == ["then", "else"]


def test_gradient_through_pred_inputs_is_only_through_branch():
    # x feeds both the predicate and the then-branch; its gradient is the branch's.
    def fn(block, F, x):
        return cond(F.sum(x) > 0, lambda: x * x, lambda: x * 3)

    (pos, neg) = check_cond(fn, [(POS,), (NEG,)], grad_inputs=(0,))
    w = loss_weights(POS, 0).asnumpy()  # the loss is sum(output * w)
    np.testing.assert_allclose(pos["grads"]["input0"], 2 * POS.asnumpy() * w, rtol=1e-5)
    np.testing.assert_allclose(neg["grads"]["input0"], 3 * w, rtol=1e-5)
