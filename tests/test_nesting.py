"""Control-flow operators nested in each other.

Imperatively: three levels deep in several orders, outputs and gradients against a
hand-unrolled reference. Hybridized: the same block called repeatedly, against the
imperative run; forward alone (without recording), and outputs with gradients.
A cond or while_loop inside a foreach that has per-step outputs cannot be
hybridized in MXNet 1.9.1 (see test_op_errors.py); states-only foreach bodies can.
"""
import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon

from gluon_dyn.ops import cond, foreach, while_loop
from conftest import (assert_nonzero_grads, assert_same, cached_graph_ops, compare_modes,
                      forward_only, make_block, make_pair, nd, run_block, run_reference)


def seq(length, *shape, seed=0):
    rng = np.random.RandomState(seed + 31 * length)
    return nd(rng.uniform(-1, 1, size=(length,) + shape))


def setup(block):
    block.dense = gluon.nn.Dense(2, in_units=2, flatten=False)
    block.w = block.params.get("w", shape=(2,))


def check_imperative(fn, reference, inputs_list, grad_inputs):
    """Imperative outputs and gradients equal the hand-unrolled reference's."""
    block = make_block(fn, setup)
    results = []
    for k, inputs in enumerate(inputs_list):
        got = run_block(block, inputs, grad_inputs)
        expected = run_reference(reference, block, inputs, grad_inputs)
        assert_same(got, expected, "call %d:" % k)
        results.append(got)
    return results


# ------------------------------------------------- imperative, three levels ---

def test_while_in_cond_in_foreach_imperative():
    def fn(block, F, xs, h0, limit, w):
        def body(x, h):
            def then():
                outs, (i, g) = while_loop(lambda i, g: i < limit,
                                          lambda i, g: ([g * w], [i + 1, F.tanh(block.dense(g))]),
                                          [F.zeros((1,)), h + x])
                return g + F.sum(outs[0], axis=0) * 0.1
            return h, cond(F.sum(x) > 0, then, lambda: h * x)
        return foreach(body, xs, h0)

    def reference(block, xs, h0, limit):
        w, h, outs = block.w.data(), h0, []
        for t in range(xs.shape[0]):
            x = xs[t]
            outs.append(h)
            if x.sum().asscalar() > 0:
                g, acc = h + x, mx.nd.zeros((2,))
                for _ in range(int(limit.asscalar())):
                    acc = acc + g * w
                    g = mx.nd.tanh(block.dense(g))
                h = g + acc * 0.1
            else:
                h = h * x
        return [mx.nd.stack(*outs), h]

    xs = nd([[0.5, 0.2], [-0.3, -0.4], [0.1, 0.6], [-0.2, 0.1]])
    h0 = nd([0.3, -0.7])
    results = check_imperative(fn, reference, [(xs, h0, nd([2])), (xs[:3], h0, nd([1])),
                                               (xs, h0, nd([4]))], grad_inputs=(0, 1))
    for r in results:
        assert_nonzero_grads(r)


def test_foreach_in_while_in_cond_imperative():
    def fn(block, F, p, xs, s0, limit, w):
        def then():
            def func(i, s):
                outs, (s2,) = foreach(lambda x, st: (st[0] * x, [block.dense(st[0]) + x * w]),
                                      xs, [s])
                return [F.sum(outs, axis=0)], [i + 1, s2]
            outs, (i, s) = while_loop(lambda i, s: i < limit, func, [F.zeros((1,)), s0])
            return [F.sum(outs[0], axis=0), s]
        return cond(p, then, lambda: [s0 * w, s0 + 1])

    def reference(block, p, xs, s0, limit):
        w = block.w.data()
        if not p.asscalar():
            return [s0 * w, s0 + 1]
        s, total = s0, mx.nd.zeros((2,))
        for _ in range(int(limit.asscalar())):
            acc = mx.nd.zeros((2,))
            for t in range(xs.shape[0]):
                acc = acc + s * xs[t]
                s = block.dense(s) + xs[t] * w
            total = total + acc
        return [total, s]

    xs = seq(3, 2)
    s0 = nd([0.4, -0.2])
    results = check_imperative(fn, reference, [(nd([1]), xs, s0, nd([2])),
                                               (nd([0]), xs, s0, nd([2])),
                                               (nd([1]), seq(2, 2), s0, nd([3]))],
                               grad_inputs=(1, 2))
    assert_nonzero_grads(results[0])


def test_cond_in_foreach_in_while_imperative():
    def fn(block, F, xs, h0, limit, w):
        def func(i, h):
            def body(x, st):
                (g,) = st
                g2 = cond(F.sum(x * g) > 0, lambda: block.dense(g) * x, lambda: g - x * w)
                return g2, [g2]
            outs, (h2,) = foreach(body, xs, [h])
            return [outs], [i + 1, h2 * 0.5]
        outs, (i, h) = while_loop(lambda i, h: i < limit, func, [F.zeros((1,)), h0])
        return [outs[0], h]

    def reference(block, xs, h0, limit):
        w, h, rows = block.w.data(), h0, []
        for _ in range(int(limit.asscalar())):
            g, steps = h, []
            for t in range(xs.shape[0]):
                x = xs[t]
                g = block.dense(g) * x if (x * g).sum().asscalar() > 0 else g - x * w
                steps.append(g)
            rows.append(mx.nd.stack(*steps))
            h = g * 0.5
        return [mx.nd.stack(*rows), h]

    xs = nd([[0.5, 0.9], [-0.8, -0.4], [0.7, -0.6]])
    results = check_imperative(fn, reference, [(xs, nd([0.6, 0.3]), nd([3])),
                                               (xs[1:], nd([-0.6, 0.3]), nd([1]))],
                               grad_inputs=(0, 1))
    for r in results:
        assert_nonzero_grads(r, ["input0", "input1", "dense.weight"])
    assert np.abs(results[0]["grads"]["w"]).sum() + np.abs(results[1]["grads"]["w"]).sum() > 0


def test_cond_in_cond_in_cond_imperative_both_branches_at_every_level():
    def fn(block, F, a, b, c, x, w):
        return cond(a, lambda: cond(b, lambda: cond(c, lambda: x * w, lambda: block.dense(x)),
                                    lambda: x * 2),
                    lambda: cond(b, lambda: x + w, lambda: cond(c, lambda: -x, lambda: x * x)))

    def reference(block, a, b, c, x):
        a, b, c, w = a.asscalar(), b.asscalar(), c.asscalar(), block.w.data()
        if a:
            return (x * w if c else block.dense(x)) if b else x * 2
        return x + w if b else (-x if c else x * x)

    x = nd([0.5, -1.5])
    combos = [(nd([a]), nd([b]), nd([c]), x) for a in (0, 1) for b in (0, 1) for c in (0, 1)]
    check_imperative(fn, reference, combos, grad_inputs=(3,))


# ------------------------------------------------------- hybridized nesting ---
# Each case: fn, the inputs of successive calls of one hybridized block, the ops its
# graph must contain, and the inputs that get a gradient.

X2 = nd([0.5, -0.8])
CASES = {}


def case(expect_ops, grad_inputs):
    def register(make_inputs):
        CASES[make_inputs.__name__] = (make_inputs, expect_ops, grad_inputs)
        return make_inputs
    return register


@case(["_cond"], (2,))
def cond_in_cond():
    def fn(block, F, a, b, x, w):
        return cond(a, lambda: cond(b, lambda: block.dense(x), lambda: x * w), lambda: x * 3)
    return fn, [(nd([a]), nd([b]), X2) for a in (1, 0) for b in (1, 0)]


@case(["_cond", "_while_loop"], (1,))
def while_in_cond():
    def fn(block, F, p, x, limit, w):
        def then():
            outs, (i, s) = while_loop(lambda i, s: i < limit,
                                      lambda i, s: ([s * w], [i + 1, block.dense(s)]),
                                      [F.zeros((1,)), x], max_iterations=4)
            return [outs[0], s]
        return cond(p, then, lambda: [F.broadcast_add(F.zeros((4, 2)), x), x * 2])
    return fn, [(nd([1]), X2, nd([3])), (nd([0]), X2, nd([3])), (nd([1]), X2, nd([1])),
                (nd([1]), X2, nd([6]))]


@case(["_cond", "_foreach"], (1, 2))
def foreach_in_cond():
    def fn(block, F, p, xs, h, w):
        def then():
            outs, s = foreach(lambda x, s: (block.dense(s) + x, s * w + x), xs, h)
            return [outs, s]
        return cond(p, then, lambda: [xs * 2, h - 1])
    xs = seq(3, 2)
    return fn, [(nd([1]), xs, X2), (nd([0]), xs, X2), (nd([1]), xs * -1, X2)]


@case(["_cond", "_while_loop"], (0,))
def cond_in_while():
    def fn(block, F, x, limit, w):
        def func(i, s):
            s2 = cond(F.sum(s) > 0, lambda: block.dense(s) - 0.5, lambda: s * w + 1)
            return [s2], [i + 1, s2]
        outs, (i, s) = while_loop(lambda i, s: i < limit, func, [F.zeros((1,)), x],
                                  max_iterations=5)
        return [outs[0], s]
    return fn, [(X2, nd([4])), (X2 * -1, nd([2])), (X2, nd([5]))]


@case(["_while_loop"], (0,))
def while_in_while():
    def fn(block, F, x, outer_limit, inner_limit, w):
        def outer_func(i, s):
            inner_outs, (j, s2) = while_loop(lambda j, t: j < inner_limit + i,
                                             lambda j, t: ([t], [j + 1, t * w + 0.1]),
                                             [F.zeros((1,)), s], max_iterations=4)
            return [F.sum(inner_outs[0], axis=0)], [i + 1, block.dense(s2)]
        outs, (i, s) = while_loop(lambda i, s: i < outer_limit, outer_func, [F.zeros((1,)), x],
                                  max_iterations=3)
        return [outs[0], s]
    return fn, [(X2, nd([3]), nd([1])), (X2, nd([2]), nd([2])), (X2, nd([1]), nd([4]))]


@case(["_foreach", "_while_loop"], (0, 1))
def foreach_in_while():
    def fn(block, F, xs, h0, limit, w):
        def func(i, h):
            outs, h2 = foreach(lambda x, s: (s * x, block.dense(s) + x * w), xs, h)
            return [F.sum(outs, axis=0)], [i + 1, h2]
        outs, (i, h) = while_loop(lambda i, h: i < limit, func, [F.zeros((1,)), h0],
                                  max_iterations=4)
        return [outs[0], h]
    return fn, [(seq(3, 2), X2, nd([2])), (seq(2, 2), X2, nd([4])), (seq(5, 2), X2, nd([1]))]


@case(["_foreach"], (0, 1))
def foreach_in_foreach():
    def fn(block, F, xss, h0, w):
        def outer(xs, h):
            inner_outs, h2 = foreach(lambda x, s: (s * x, block.dense(s) + x * w), xs, h)
            return inner_outs, h2
        return foreach(outer, xss, h0)
    return fn, [(seq(3, 2, 2), X2), (seq(2, 4, 2), X2), (seq(1, 1, 2), X2)]


@case(["_cond", "_while_loop", "_foreach"], (1, 2))
def foreach_in_while_in_cond():
    def fn(block, F, p, xs, h0, limit, w):
        def then():
            def func(i, h):
                outs, (h2,) = foreach(lambda x, s: (s[0] * x, [block.dense(s[0]) + x * w]),
                                      xs, [h])
                return [outs], [i + 1, h2]
            outs, (i, h) = while_loop(lambda i, h: i < limit, func, [F.zeros((1,)), h0],
                                      max_iterations=3)
            return [outs[0], h]
        return cond(p, then, lambda: [F.broadcast_add(F.zeros((3, 1, 1)), F.expand_dims(xs, 0)),
                                      h0 * w])
    xs = seq(2, 2)
    return fn, [(nd([1]), xs, X2, nd([2])), (nd([0]), xs, X2, nd([2])),
                (nd([1]), xs, X2, nd([3])), (nd([1]), xs, X2, nd([1]))]


@case(["_cond", "_while_loop"], (0, 1))
def cond_in_foreach_with_states_only():
    # A foreach without per-step outputs whose body holds a cond (run as a while_loop).
    def fn(block, F, xs, h0, w):
        def body(x, states):
            (h,) = states
            h2 = cond(F.sum(x * h) > 0, lambda: block.dense(h) * x, lambda: h - x * w)
            return [], [h2]
        outs, (h,) = foreach(body, xs, [h0])
        assert outs == []
        return h
    xs = nd([[0.5, 0.9], [-0.8, -0.4], [0.7, -0.6]])
    return fn, [(xs, X2), (xs[1:], X2 * -1), (xs[:1], X2)]


@case(["_while_loop"], (0, 1))
def while_in_foreach_with_states_only():
    def fn(block, F, xs, h0, limit, w):
        def body(x, states):
            (h,) = states
            _, (i, g) = while_loop(lambda i, g: i < limit,
                                   lambda i, g: ([], [i + 1, block.dense(g) * w + x]),
                                   [F.zeros((1,)), h], max_iterations=3)
            return [], [g]
        return foreach(body, xs, [h0])[1]
    xs = nd([[0.5, 0.9], [-0.8, -0.4], [0.7, -0.6]])
    return fn, [(xs, X2, nd([2])), (xs[:1], X2, nd([0])), (xs, X2, nd([3]))]


@pytest.mark.parametrize("name", sorted(CASES))
def test_nested_forward_hybridized(name):
    """Hybridized forward equals imperative forward, on the same hybridized block every call."""
    make, expect_ops, _ = CASES[name]
    fn, inputs_list = make()
    imp, hyb = make_pair(fn, setup)
    for k, inputs in enumerate(inputs_list):
        expected, expected_structure = forward_only(imp, inputs)
        got, got_structure = forward_only(hyb, inputs)
        assert got_structure == expected_structure
        for i, (g, e) in enumerate(zip(got, expected)):
            assert g.shape == e.shape, "call %d output %d" % (k, i)
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5,
                                       err_msg="call %d output %d" % (k, i))
    assert set(expect_ops) <= cached_graph_ops(hyb)


@pytest.mark.parametrize("name", sorted(CASES))
def test_nested_gradients_hybridized(name):
    """Outputs and gradients (inputs and parameters), hybridized vs imperative."""
    make, expect_ops, grad_inputs = CASES[name]
    fn, inputs_list = make()
    results = compare_modes(fn, inputs_list, grad_inputs=grad_inputs, setup=setup,
                            expect_ops=expect_ops)
    assert any(np.abs(r["grads"]["dense.weight"]).sum() > 0 for r in results)


class StepsAroundBranchesAndLoops(gluon.HybridBlock):
    """foreach whose body returns per-step outputs and holds a cond and a while_loop."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(3, in_units=3)

    def hybrid_forward(self, F, x, h0):
        def body(row, states):
            h = cond(F.sum(row) > 0, lambda: F.tanh(self.dense(states[0]) + row),
                     lambda: states[0] * 0.5)
            _, (_, g) = while_loop(lambda c, g: F.sum(c) < 2,
                                   lambda c, g: ([], [c + 1, g * 1.1]), [F.zeros((1,)), h],
                                   max_iterations=4)
            return [h, g], [g]
        outs, states = foreach(body, x, [h0])
        return F.sum(outs[0], axis=0) + F.sum(outs[1]) + states[0]


def test_foreach_with_step_outputs_around_cond_and_while_loop_under_dynamic_hybridize():
    import gluon_dyn
    from mxnet import autograd
    imperative, dynamic = StepsAroundBranchesAndLoops(), StepsAroundBranchesAndLoops()
    imperative.initialize(mx.init.Uniform(0.5))
    dynamic.initialize()
    for a, b in zip(imperative.collect_params().values(), dynamic.collect_params().values()):
        b.set_data(a.data())
    dynamic.hybridize(dynamic=True, profile_calls=1, check_speed=False)
    for n in (4, 4, 6, 2, 6, 1):
        rng = np.random.RandomState(n)
        # Rows of both signs (both branches) and every call using the dense layer.
        x = rng.randn(n, 1, 3)
        x[0] = np.abs(x[0])
        results = []
        for block in (imperative, dynamic):
            xs, h = mx.nd.array(x), mx.nd.array(np.random.RandomState(9).randn(1, 3))
            xs.attach_grad()
            h.attach_grad()
            with autograd.record():
                y = block(xs, h)
            y.backward()
            results.append([y, xs.grad, h.grad, block.dense.weight.grad(), block.dense.bias.grad()])
        for want, got in zip(*results):
            np.testing.assert_allclose(got.asnumpy(), want.asnumpy(), rtol=1e-5, atol=1e-5)
    calls = gluon_dyn.hybridize.report(dynamic)["calls"]
    assert calls["by_kind"]["graph"] == 5 and calls["last"] == "graph"
