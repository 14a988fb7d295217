"""Weights prepared once per change: a TVM segment transposes and packs its
parameters in a function of their own (runtime.PREPARE_FUNCTION) and keeps the
result until MXNet reports a write to one of them. Every way a Gluon user
changes weights must be seen: results match MXNet after each, and each change
costs exactly one preparation (calls without a change cost none)."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_dyn
from test_tvm_models import UnrolledLSTM, initialized, sequence_batch
from tvm_bridge import compile_block, runtime


def compiled_lstm(tmp_path):
    """An unrolled LSTM and its plan, forced onto TVM, with the one TVM function."""
    net = initialized(UnrolledLSTM())
    inputs = [mx.nd.array(a) for a in sequence_batch(2)]
    compiled = compile_block(net, *inputs, cache_dir=str(tmp_path), choose_by_measurement=False)
    (step,) = compiled.plan.steps
    assert step.backend == "tvm" and step.function.signature.num_data == 2
    return net, compiled, step.function, inputs


def assert_matches(net, compiled, inputs):
    expected, got = net(*inputs), compiled(*inputs)
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g.asnumpy(), e.asnumpy(), rtol=1e-5, atol=1e-5)


def trainer_step(net, inputs):
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5})
    with autograd.record():
        loss = net(*inputs)[0].sum()
    loss.backward()
    trainer.step(1)


def set_data(net, _inputs):
    for param in net.collect_params().values():
        param.set_data(param.data() * 0.5 + 0.01)


def assign_numpy(net, _inputs):
    weight = net.h2h.weight
    weight.data()[:] = np.random.RandomState(3).uniform(-1, 1, weight.shape)


def assign_rows(net, _inputs):
    net.i2h.weight.data()[1:3] = 0.25  # part of one weight, with a scalar


def in_place_arithmetic(net, _inputs):
    net.i2h.bias.data()[:] *= 3


def load_parameters(net, _inputs, path=None):
    other = initialized(UnrolledLSTM())
    other.save_parameters(path)
    net.load_parameters(path)


@pytest.mark.parametrize("change", [trainer_step, set_data, assign_numpy, assign_rows,
                                    in_place_arithmetic, load_parameters])
def test_every_way_of_changing_weights_is_seen_once(tmp_path, change):
    net, compiled, function, inputs = compiled_lstm(tmp_path)
    for _ in range(3):
        assert_matches(net, compiled, inputs)
    assert function.preparations == 1  # unchanged weights are not prepared again
    if change is load_parameters:
        change(net, inputs, path=str(tmp_path / "other.params"))
    else:
        change(net, inputs)
    for _ in range(3):
        assert_matches(net, compiled, inputs)
    assert function.preparations == 2


def test_a_reinitialised_parameter_is_a_new_array_and_is_prepared_again(tmp_path):
    net, compiled, function, inputs = compiled_lstm(tmp_path)
    assert_matches(net, compiled, inputs)
    net.initialize(mx.init.Uniform(0.3), force_reinit=True)
    assert_matches(net, compiled, inputs)
    assert function.preparations == 2


def test_without_a_version_reader_weights_are_prepared_at_every_call(tmp_path, monkeypatch):
    """As in a copy of runtime.py deployed alone: correct, prepared per call."""
    monkeypatch.setattr(runtime, "array_versions_reader", None)
    net, compiled, function, inputs = compiled_lstm(tmp_path)
    for calls in (1, 2, 3):
        assert_matches(net, compiled, inputs)
        assert function.preparations == calls
    set_data(net, inputs)
    assert_matches(net, compiled, inputs)


def test_the_native_reader_counts_completed_writes():
    array, other = mx.nd.zeros((4,)), mx.nd.zeros((2,))
    read_again = gluon_dyn.native.ndarray_versions_reader([array, other])
    (before, other_before) = gluon_dyn.native.ndarray_versions([array, other])
    assert read_again() == (before, other_before)
    array[:] = 1
    array += 2      # pending writes are waited for, then counted
    assert gluon_dyn.native.ndarray_versions([array, other]) == (before + 2, other_before)
    assert read_again() == (before + 2, other_before)     # a reader made before the writes
    array.asnumpy()  # reads count nothing
    assert gluon_dyn.native.ndarray_versions([array]) == (before + 2,)


class CellLoop(gluon.Block):
    """A plain Block looping over an LSTM cell: the dynamic backend's kind of model."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = gluon.rnn.LSTMCell(8, input_size=4)

    def forward(self, seq):
        state = [mx.nd.zeros((seq.shape[1], 8)), mx.nd.zeros((seq.shape[1], 8))]
        for t in range(seq.shape[0]):
            out, state = self.cell(seq[t], state)
        return out


def test_the_dynamic_backend_prepares_gluon_parameters_once(tmp_path):
    """hybridize(dynamic=True, backend="tvm"): parameters are found among the graph
    inputs (read as weights, not as first arguments) and prepared once per change."""
    net, reference = initialized(CellLoop()), initialized(CellLoop())
    for a, b in zip(net.collect_params().values(), reference.collect_params().values()):
        b.set_data(a.data())
    net.hybridize(dynamic=True, backend="tvm", backend_options={
        "cache_dir": str(tmp_path), "choose_by_measurement": False})
    seq = mx.nd.array(np.random.RandomState(0).uniform(-1, 1, (3, 2, 4)))

    def check():
        np.testing.assert_allclose(net(seq).asnumpy(), reference(seq).asnumpy(), rtol=1e-5,
                                   atol=1e-5)

    def only_plan():
        (plan,) = gluon_dyn.hybridize.report(net)["tvm"]["plans"]
        return plan

    for _ in range(6):
        check()
    (segment,) = only_plan()["segments"]
    assert segment["backend"] == "tvm" and segment["preparations"] == 1
    assert only_plan()["parameters"] == sorted(p.name for p in net.collect_params().values())
    for block in (net, reference):
        set_data(block, None)
    check()
    assert only_plan()["segments"][0]["preparations"] == 2
