"""gluon_dyn_dropout (src/operator/control_flow/dropout_op.cc): MXNet's Dropout as it
drops, the same numbers from the same random states, and where graphs run it
(hybridize/passes/equivalent_ops.py: recorded runs in training mode).

Results, gradients and the random states after the operator (the numbers drawn
next) are compared with MXNet's own bit for bit: the operator replaces one that
draws random numbers, and any other number would make every later draw differ."""
import json

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_dyn  # noqa: F401 - loads the operator library
from gluon_dyn import native
from gluon_dyn.hybridize.call.dynamic import report, runner_of
from gluon_dyn.hybridize.passes import equivalent_ops


def bits(array):
    return array.asnumpy().view(np.uint32)


def dropped(x, p, ours, gradient):
    """(result, the input's gradient, the numbers drawn next) of a recorded dropout."""
    x = x.copy()
    x.attach_grad()
    with autograd.record():
        y = mx.nd.gluon_dyn_dropout(x, p=p)[0] if ours else mx.nd.Dropout(x, p=float(p))
    y.backward(gradient)
    return bits(y), bits(x.grad), bits(mx.nd.random.uniform(shape=(7,)))


# Sizes around MXNet's runs of 64 numbers a state and its 1,024 states (200,003
# elements: runs of 196), p of float parsings that round differently.
@pytest.mark.parametrize("size", [1, 7, 63, 64, 65, 3200, 32768, 65537, 200003])
@pytest.mark.parametrize("p", ["0.3", "0.5", "0.123456789", "0.05", "0.7"])
def test_the_operator_drops_as_mxnets_dropout_bit_for_bit(size, p):
    random = np.random.RandomState(size)
    x = mx.nd.array(random.standard_normal(size).astype(np.float32))
    gradient = mx.nd.array(random.standard_normal(size).astype(np.float32))
    results = []
    for ours in (False, True):
        mx.random.seed(11)
        # Three calls: the states' words run out (624 numbers) at different calls.
        results.append([dropped(x, p, ours, gradient) for _ in range(12)])
    for theirs, ours in zip(*results):
        for what, a, b in zip(("result", "gradient", "next numbers"), theirs, ours):
            np.testing.assert_array_equal(b, a, err_msg=what)
    kept = np.concatenate([result for result, _, _ in results[1]]) != 0
    assert 0 < kept.mean() < 1 or size < 64


def test_the_mask_says_which_elements_were_kept():
    x = mx.nd.ones((4, 50))
    result, mask = mx.nd.gluon_dyn_dropout(x, p="0.25")
    assert mask.dtype == np.uint8 and mask.shape == x.shape
    np.testing.assert_array_equal(result.asnumpy() != 0, mask.asnumpy() == 1)
    np.testing.assert_allclose(result.asnumpy()[mask.asnumpy() == 1], 1 / 0.75, rtol=1e-7)


@pytest.mark.parametrize("p, cause", [("abc", "p must be a decimal"), ("0", "p must be a decimal"),
                                      ("1e-3", "p must be a decimal")])
def test_a_bad_probability_is_refused_naming_it(p, cause):
    with pytest.raises(mx.MXNetError, match=cause):
        mx.nd.gluon_dyn_dropout(mx.nd.ones((3,)), p=p)[0].wait_to_read()


def test_a_float64_input_is_refused_naming_its_dtype():
    with pytest.raises(mx.MXNetError, match="float32 input only"):
        mx.nd.gluon_dyn_dropout(mx.nd.ones((3,), dtype="float64"), p="0.5")[0].wait_to_read()


class Dropping(gluon.Block):
    """Dense, dropout while training (as GAN's discriminator and LeNet write it), Dense."""

    def __init__(self, p=0.3, axes=()):
        super().__init__()
        self.p, self.axes = p, axes
        with self.name_scope():
            self.hidden = gluon.nn.Dense(32, in_units=8)
            self.out = gluon.nn.Dense(4, in_units=32)

    def forward(self, x):
        h = mx.nd.LeakyReLU(self.hidden(x), slope=0.2)
        if autograd.is_training():
            h = mx.nd.Dropout(h, p=self.p, axes=self.axes)
        return self.out(h)


def twins(**options):
    mx.random.seed(0)
    imperative, dynamic = Dropping(**options), Dropping(**options)
    for block in (imperative, dynamic):
        block.initialize(mx.init.Xavier())
    for (_, a), (_, b) in zip(sorted(imperative.collect_params().items()),
                              sorted(dynamic.collect_params().items())):
        b.set_data(a.data().copy())
    dynamic.hybridize(dynamic=True, profile_calls=1, check_speed=False)
    return imperative, dynamic


def recorded_step(block, x, seed, train_mode=True):
    """Output, parameter gradients and the next numbers of a recorded call, seeded."""
    mx.random.seed(seed)
    with autograd.record(train_mode=train_mode):
        out = block(x)
        loss = (out * out).sum()
    loss.backward()
    grads = [p.grad().asnumpy() for _, p in sorted(block.collect_params().items())]
    return [out.asnumpy()] + grads + [mx.nd.random.uniform(shape=(5,)).asnumpy()]


def recorded_ops(block):
    graphs = [executor.recording_graph for executor in runner_of(block).cache.values()
              if executor.recording_graph is not None]
    return {node["op"] for graph in graphs for node in json.loads(graph.tojson())["nodes"]}


def step_alike(imperative, dynamic, steps=5, **recording):
    for step in range(steps):
        x = mx.nd.array(np.random.RandomState(step).standard_normal((16, 8)))
        expected = recorded_step(imperative, x, step, **recording)
        got = recorded_step(dynamic, x, step, **recording)
        for a, b in zip(expected, got):
            np.testing.assert_array_equal(b, a)
    by_kind = report(dynamic)["calls"]["by_kind"]
    assert by_kind["graph"] == steps - 1 and by_kind["fallback"] == 0, by_kind


def test_a_recorded_training_graph_drops_with_gluon_dyns_operator_as_written():
    imperative, dynamic = twins()
    step_alike(imperative, dynamic)
    ops = recorded_ops(dynamic)
    assert native.DROPOUT_OP in ops and "Dropout" not in ops, ops


@pytest.mark.parametrize("options, why", [({"p": 1e-05}, "p written 1e-05"),
                                          ({"axes": (0,)}, "dropout along an axis")])
def test_dropouts_it_does_not_draw_alike_keep_mxnets_operator(options, why):
    imperative, dynamic = twins(**options)
    step_alike(imperative, dynamic)
    ops = recorded_ops(dynamic)
    assert "Dropout" in ops and native.DROPOUT_OP not in ops, (why, ops)


def test_a_graph_recorded_in_prediction_mode_keeps_no_dropout_of_gluon_dyns():
    imperative, dynamic = twins()
    step_alike(imperative, dynamic, train_mode=False)
    assert native.DROPOUT_OP not in recorded_ops(dynamic)


def test_the_rewrite_needs_mxnets_own_dropout_kernel_and_one_copy_of_the_states(monkeypatch):
    monkeypatch.setenv("MXNET_CPU_PARALLEL_RAND_COPY", "2")
    assert not equivalent_ops._draws_as_mxnet()
    monkeypatch.setenv("MXNET_CPU_PARALLEL_RAND_COPY", "1")
    assert equivalent_ops._draws_as_mxnet() == \
        (not mx.runtime.Features().is_enabled("BLAS_MKL"))
