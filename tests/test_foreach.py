"""foreach: imperative vs hybridized vs plain-Python reference, outputs and gradients."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon
from mxnet.base import MXNetError

from gluon_dyn.ops import foreach
from conftest import (FnBlock, assert_nonzero_grads, assert_params_equal, compare_modes,
                      forward_only, loss_weights, make_pair, nd, run_block)


def seq(length, *shape, seed=0):
    rng = np.random.RandomState(seed + 17 * length)
    return nd(rng.uniform(-1, 1, size=(length,) + shape))


def check_foreach(fn, inputs_list, **kwargs):
    return compare_modes(fn, inputs_list, expect_ops=("_foreach",), **kwargs)


def rnn_setup(block):
    block.i2h = gluon.nn.Dense(4, in_units=3, flatten=False)
    block.h2h = gluon.nn.Dense(4, in_units=4, flatten=False, use_bias=False)


def test_rnn_scan_with_dense_cell_varying_sequence_length():
    def fn(block, F, xs, h0):
        def step(x, states):
            h = F.tanh(block.i2h(x) + block.h2h(states[0]))
            return h * 2, [h]
        outs, (h,) = foreach(step, xs, [h0])
        return outs, h

    def reference(block, xs, h0):
        h, outs = h0, []
        for t in range(xs.shape[0]):
            h = mx.nd.tanh(block.i2h(xs[t]) + block.h2h(h))
            outs.append(h * 2)
        return mx.nd.stack(*outs), h

    h0 = nd(np.linspace(-0.5, 0.5, 8).reshape(2, 4))
    lengths = [1, 5, 3, 1, 7]  # the same hybridized block sees every length
    results = check_foreach(fn, [(seq(n, 2, 3), h0) for n in lengths], grad_inputs=(0, 1),
                            setup=rnn_setup, reference=reference)
    for n, r in zip(lengths, results):
        assert r["outputs"][0].shape == (n, 2, 4)
        assert_nonzero_grads(r)


def test_map_without_states():
    def fn(block, F, xs, ys, w):
        outs, states = foreach(lambda d, s: ([d[0] * w + d[1], F.sin(d[0])], []), [xs, ys], [])
        assert states == []
        return outs

    def reference(block, xs, ys):
        w = block.w.data()
        return [mx.nd.stack(*[xs[t] * w + ys[t] for t in range(xs.shape[0])]),
                mx.nd.stack(*[mx.nd.sin(xs[t]) for t in range(xs.shape[0])])]

    def setup(block):
        block.w = block.params.get("w", shape=(3,))

    results = check_foreach(fn, [(seq(n, 3), seq(n, 3, seed=1)) for n in (4, 1, 2)],
                            grad_inputs=(0, 1), setup=setup, reference=reference)
    for r in results:
        assert r["structure"] == [None, None]
        assert_nonzero_grads(r)


def test_scan_without_per_step_outputs():
    def fn(block, F, xs, a0, b0):
        outs, (a, b) = foreach(lambda x, s: ([], [s[0] * x + s[1], s[1] - x]), xs, [a0, b0])
        assert outs == []
        return [a, b]

    def reference(block, xs, a0, b0):
        a, b = a0, b0
        for t in range(xs.shape[0]):
            a, b = a * xs[t] + b, b - xs[t]
        return [a, b]

    a0, b0 = nd([0.5, -1.0]), nd([0.25, 2.0])
    results = check_foreach(fn, [(seq(n, 2), a0, b0) for n in (3, 1, 6)], grad_inputs=(0, 1, 2),
                            reference=reference)
    for r in results:
        assert_nonzero_grads(r)


def two_state_body(F):
    return lambda d, s: (d + s[0] * s[1], [s[0] + d, s[1] * 2])


def test_same_symbol_passed_as_two_states():
    def ours(block, F, xs, h):
        outs, states = foreach(two_state_body(F), xs, [h, h])
        return [outs, states]

    def reference(block, xs, h):
        a, b, outs = h, h, []
        for t in range(xs.shape[0]):
            outs.append(xs[t] + a * b)
            a, b = a + xs[t], b * 2
        return [mx.nd.stack(*outs), [a, b]]

    h = nd([0.5, -0.25])
    results = check_foreach(ours, [(seq(n, 2), h) for n in (3, 2)], grad_inputs=(0, 1),
                            reference=reference)
    assert_nonzero_grads(results[0])


def test_mxnet_foreach_rejects_same_symbol_as_two_states_but_ours_does_not():
    def theirs(block, F, xs, h):
        outs, states = F.contrib.foreach(two_state_body(F), xs, [h, h])
        return [outs, states]

    def ours(block, F, xs, h):
        outs, states = foreach(two_state_body(F), xs, [h, h])
        return [outs, states]

    inputs = (seq(3, 2), nd([0.5, -0.25]))
    mx_block = FnBlock(theirs)
    mx_block.initialize()
    mx_block.hybridize()
    with pytest.raises((MXNetError, AssertionError), match="unique names"):
        forward_only(mx_block, inputs)
    # MXNet's imperative foreach agrees with ours, hybridized.
    mx_imperative = FnBlock(theirs)
    mx_imperative.initialize()
    expected, _ = forward_only(mx_imperative, inputs)
    imp, hyb = make_pair(ours)
    for block in (imp, hyb):
        got, _ = forward_only(block, inputs)
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


def test_data_the_body_does_not_read():
    def fn(block, F, xs, h0):
        outs, h = foreach(lambda x, s: (s * 3, s * 0.5 + 1), xs, h0)
        return [outs, h]

    def reference(block, xs, h0):
        h, outs = h0, []
        for _ in range(xs.shape[0]):
            outs.append(h * 3)
            h = h * 0.5 + 1
        return [mx.nd.stack(*outs), h]

    h0 = nd([[1.0, -2.0]])
    results = check_foreach(fn, [(seq(n, 5), h0) for n in (4, 1, 2)], grad_inputs=(0, 1),
                            reference=reference)
    for n, r in zip((4, 1, 2), results):
        assert r["outputs"][0].shape == (n, 1, 2)
        assert not r["grads"]["input0"].any()  # data unused: zero gradient
        assert_nonzero_grads(r, ["input1"])


def test_state_the_body_does_not_read():
    # State 1 is overwritten each step without being read; state 2 is passed through.
    def fn(block, F, xs, a0, b0, c0):
        def body(x, s):
            a, b, c = s
            return a * x, [a + x, x * 2, c]
        outs, states = foreach(body, xs, [a0, b0, c0])
        return [outs, states]

    def reference(block, xs, a0, b0, c0):
        a, b, c, outs = a0, b0, c0, []
        for t in range(xs.shape[0]):
            outs.append(a * xs[t])
            a, b = a + xs[t], xs[t] * 2
        return [mx.nd.stack(*outs), [a, b, c]]

    a0, b0, c0 = nd([1.0, 2.0]), nd([3.0, 4.0]), nd([5.0, 6.0])
    results = check_foreach(fn, [(seq(n, 2), a0, b0, c0) for n in (3, 1)],
                            grad_inputs=(0, 1, 2, 3), reference=reference)
    for r in results:
        assert not r["grads"]["input2"].any()  # b0 is never read
        w_c = loss_weights(c0, 3).asnumpy()
        np.testing.assert_allclose(r["grads"]["input3"], w_c, rtol=1e-6)  # c0 passes through


def test_nested_structures_in_data_states_and_outputs():
    def setup(block):
        block.dense = gluon.nn.Dense(2, in_units=2, flatten=False)

    def fn(block, F, xs, ys, zs, p0, q0):
        def body(d, s):
            x, (y, z) = d
            p, (q,) = s
            new_p = block.dense(x * p) + y
            new_q = q * z
            return [new_p, [new_q, x]], [new_p, [new_q]]
        outs, (p, (q,)) = foreach(body, [xs, [ys, zs]], [p0, [q0]])
        return [outs, p, q]

    def reference(block, xs, ys, zs, p0, q0):
        p, q, o1, o2, o3 = p0, q0, [], [], []
        for t in range(xs.shape[0]):
            p = block.dense(xs[t] * p) + ys[t]
            q = q * zs[t]
            o1.append(p), o2.append(q), o3.append(xs[t])
        return [[mx.nd.stack(*o1), [mx.nd.stack(*o2), mx.nd.stack(*o3)]], p, q]

    p0, q0 = nd([0.5, 0.5]), nd([1.0, -1.0])
    results = check_foreach(fn, [(seq(n, 2), seq(n, 2, seed=1), seq(n, 2, seed=2), p0, q0)
                                 for n in (2, 4)],
                            grad_inputs=(0, 1, 2, 3, 4), setup=setup, reference=reference)
    assert results[0]["structure"] == [[None, [None, None]], None, None]
    assert_nonzero_grads(results[1])


def test_body_closing_over_outer_array_and_parameter():
    def setup(block):
        block.w = block.params.get("w", shape=(1, 3))

    def fn(block, F, xs, bias, h0, w):
        scale = F.sigmoid(bias) * 2  # computed outside the loop, read inside
        outs, h = foreach(lambda x, s: (F.broadcast_mul(s, w) + x, s * scale + x), xs, h0)
        return [outs, h]

    def reference(block, xs, bias, h0):
        w, scale = block.w.data(), mx.nd.sigmoid(bias) * 2
        h, outs = h0, []
        for t in range(xs.shape[0]):
            outs.append(h * w + xs[t])
            h = h * scale + xs[t]
        return [mx.nd.stack(*outs), h]

    bias, h0 = nd([[0.1, -0.3, 0.2]]), nd([[0.3, 0.2, 0.1]])
    results = check_foreach(fn, [(seq(n, 1, 3), bias, h0) for n in (3, 1, 5)],
                            grad_inputs=(0, 1, 2), setup=setup, reference=reference)
    for r in results:
        assert_nonzero_grads(r)


def test_rnn_training_steps_keep_parameters_equal():
    def fn(block, F, xs, h0):
        outs, h = foreach(lambda x, s: (F.tanh(block.i2h(x) + block.h2h(s)),) * 2, xs, h0)
        return F.sum(outs) + F.sum(h)

    imp, hyb = make_pair(fn, rnn_setup)
    trainers = [gluon.Trainer(b.collect_params(), "sgd", {"learning_rate": 0.1}) for b in (imp, hyb)]
    h0 = nd(np.zeros((2, 4)))
    for step, n in enumerate((3, 1, 4)):
        xs = seq(n, 2, 3, seed=step)
        for block, trainer in zip((imp, hyb), trainers):
            with autograd.record():
                loss = block(xs, h0)
            loss.backward()
            trainer.step(1)
        assert_params_equal(hyb, imp)


def zero_length(*shape):
    return mx.nd.array(np.zeros((0,) + shape, dtype=np.float32))


# Zero-length data in MXNet's default (legacy) shape mode, where a 0 in a shape
# given to mx.nd.zeros means "unknown", and in NumPy shape mode.
ZERO_SHAPE_MODES = pytest.mark.parametrize("np_shape", [False, True], ids=["legacy_shape",
                                                                           "np_shape"])


@ZERO_SHAPE_MODES
def test_zero_length_data_imperatively(np_shape):
    with mx.util.np_shape(np_shape):
        check_zero_length_data()


def check_zero_length_data():
    h0 = nd([[1.0, 2.0, 3.0]])
    h0.attach_grad()
    xs = zero_length(1, 3)
    assert xs.shape == (0, 1, 3)
    calls = []

    def body(x, states):
        (s,) = states
        calls.append(x.shape)
        return [x * s, [mx.nd.sum(s, axis=1), x]], [s + x]

    with autograd.record():
        outs, (h,) = foreach(body, xs, [h0])
        loss = (h * 2).sum()
    loss.backward()
    assert calls == [(1, 3)]  # traced once on a zero slice, to learn the outputs' structure
    assert isinstance(outs, list) and isinstance(outs[1], list) and len(outs[1]) == 2
    assert outs[0].shape == (0, 1, 3)
    assert outs[1][0].shape == (0, 1)
    assert outs[1][1].shape == (0, 1, 3)
    np.testing.assert_allclose(h.asnumpy(), h0.asnumpy())
    np.testing.assert_allclose(h0.grad.asnumpy(), 2 * np.ones((1, 3)))


@ZERO_SHAPE_MODES
def test_zero_length_one_dimensional_data_imperatively(np_shape):
    with mx.util.np_shape(np_shape):
        outs, s = foreach(lambda x, s: ([x * s], s + x), zero_length(), nd([1.0, 2.0]))
        assert outs[0].shape == (0, 2)
        np.testing.assert_allclose(s.asnumpy(), [1.0, 2.0])


def test_hybridized_gradient_to_data_matches_manual_formula():
    # out_t = x_t * c (c a closed-over input) -> d loss / d x_t = c * w_t exactly.
    def fn(block, F, xs, c):
        outs, _ = foreach(lambda x, s: (x * c, []), xs, [])
        return outs

    xs, c = seq(4, 3), nd([2.0, -1.0, 0.5])
    imp, hyb = make_pair(fn)
    r = run_block(hyb, (xs, c), grad_inputs=(0, 1))
    w = loss_weights(xs, 0).asnumpy()
    np.testing.assert_allclose(r["grads"]["input0"], w * c.asnumpy(), rtol=1e-6)
    np.testing.assert_allclose(r["grads"]["input1"], (w * xs.asnumpy()).sum(0), rtol=1e-5)
