"""SegmentedGraph: TVM segments and MXNet CachedOps in one plan, run on NDArrays;
and hybridize(dynamic=True, backend="tvm"). Results only: which backend wins a
measurement is never asserted (timing never decides a test)."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_dyn
from tvm_bridge import SegmentedGraph
from test_tvm_partition import SHAPES, quadratic_in_the_middle
from tvm_helpers import assert_outputs_close, make_inputs, run_mxnet


def run_plan(plan, symbol, inputs):
    return [out.asnumpy() for out in plan(*[mx.nd.array(inputs[name], dtype=inputs[name].dtype)
                                            for name in symbol.list_inputs()])]


@pytest.mark.parametrize("choose", [False, True])
def test_unsupported_op_in_the_middle_runs_split(tmp_path, choose):
    symbol = quadratic_in_the_middle()
    inputs = make_inputs(symbol, SHAPES)
    arrays = [mx.nd.array(inputs[name]) for name in symbol.list_inputs()]
    plan = SegmentedGraph(symbol, symbol.list_inputs(), arrays, cache_dir=str(tmp_path),
                          choose_by_measurement=choose)
    assert_outputs_close(run_plan(plan, symbol, inputs), run_mxnet(symbol, inputs))
    report = plan.report()
    assert [s["convertible"] for s in report["segments"]] == [True, False, True]
    assert "_contrib_quadratic" in report["segments"][1]["op_names"]
    if choose:
        assert set(report["segments"][0]["times_ms"]) == {"tvm", "mxnet"}
        assert report["plan_ms"] > 0 and report["whole_graph_mxnet_ms"] > 0


def test_one_plan_serves_a_symbolic_batch(tmp_path):
    symbol = quadratic_in_the_middle()
    example = make_inputs(symbol, SHAPES)
    plan = SegmentedGraph(symbol, symbol.list_inputs(),
                          [mx.nd.array(example[name]) for name in symbol.list_inputs()],
                          symbolic_dims={"x": {0: "batch"}}, cache_dir=str(tmp_path),
                          choose_by_measurement=False)
    for batch in (2, 7):
        inputs = make_inputs(symbol, dict(SHAPES, x=(batch, 5)), seed=batch)
        assert_outputs_close(run_plan(plan, symbol, inputs), run_mxnet(symbol, inputs))


def fail(*args, **kwargs):
    raise RuntimeError("injected failure")


@pytest.mark.parametrize("broken, note", [
    ("tvm_bridge.segmented.compile_module", "TVM compile failed, runs in MXNet: RuntimeError"),
    ("tvm_bridge.runtime.CompiledFunction.call_unchecked",
     "TVM run failed, runs in MXNet: RuntimeError")])
def test_a_segment_tvm_fails_on_runs_in_mxnet_with_the_reason(tmp_path, monkeypatch, broken,
                                                               note):
    monkeypatch.setattr(broken, fail)
    symbol = quadratic_in_the_middle()
    inputs = make_inputs(symbol, SHAPES)
    arrays = [mx.nd.array(inputs[name]) for name in symbol.list_inputs()]
    plan = SegmentedGraph(symbol, symbol.list_inputs(), arrays, cache_dir=str(tmp_path))
    assert_outputs_close(run_plan(plan, symbol, inputs), run_mxnet(symbol, inputs))
    segments = plan.report()["segments"]
    assert [s["backend"] for s in segments] == ["mxnet"] * 3
    assert note in segments[0]["reasons"][-1] and "injected failure" in segments[0]["reasons"][-1]


def test_training_and_inputs_that_do_not_fit_are_refused_clearly(tmp_path):
    symbol = quadratic_in_the_middle()
    inputs = make_inputs(symbol, SHAPES)
    arrays = [mx.nd.array(inputs[name]) for name in symbol.list_inputs()]
    plan = SegmentedGraph(symbol, symbol.list_inputs(), arrays, cache_dir=str(tmp_path),
                          choose_by_measurement=False)
    with autograd.record(), pytest.raises(RuntimeError, match="inference only"):
        plan(*arrays)
    with pytest.raises(ValueError, match="no example input for graph input"):
        SegmentedGraph(symbol, ["x"], arrays[:1])
    with pytest.raises(ValueError, match=r"input 'x': the plan was built for shape \(3, 5\)"):
        plan(mx.nd.ones((4, 5)), *arrays[1:])


class Tagger(gluon.Block):
    """An imperative RNN-style loop with a data-dependent refinement."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = gluon.rnn.GRUCell(8, input_size=4)
            self.out = gluon.nn.Dense(3, in_units=8)

    def forward(self, seq, steps):
        h = [mx.nd.zeros((1, 8))]
        for t in range(seq.shape[0]):
            y, h = self.cell(seq[t], h)
        i = mx.nd.zeros((1,))
        while mx.nd.sum(i) < mx.nd.sum(steps):
            y = mx.nd.tanh(y) * 1.5
            i = i + 1
        return mx.nd.softmax(self.out(y))


class FixedTagger(Tagger):
    """The same without the data-dependent loop: every graph is static."""

    def forward(self, seq):
        h = [mx.nd.zeros((1, 8))]
        for t in range(seq.shape[0]):
            y, h = self.cell(seq[t], h)
        return mx.nd.softmax(self.out(y))


def run_tagger(cls, trips, tmp_path, monkeypatch):
    """Imperative vs dynamic on TVM over calls with these loop trip counts (one
    training call among them); returns the dynamic block's report."""
    monkeypatch.setenv("GLUON_DYN_TVM_CACHE", str(tmp_path))
    imperative, dynamic = cls(), cls()
    for block in (imperative, dynamic):
        block.initialize(mx.init.Uniform(0.5))
    for a, b in zip(imperative.collect_params().values(), dynamic.collect_params().values()):
        b.set_data(a.data())
    # Every segment TVM compiles stays on TVM: the results below are TVM's.
    dynamic.hybridize(dynamic=True, backend="tvm",
                      backend_options={"choose_by_measurement": False})
    rng = np.random.RandomState(0)
    for call, steps in enumerate(trips):
        args = (mx.nd.array(rng.randn(5, 1, 4)),) + (
            (mx.nd.array([steps]),) if steps is not None else ())
        np.testing.assert_allclose(dynamic(*args).asnumpy(), imperative(*args).asnumpy(),
                                   rtol=1e-5, atol=1e-6)
        if call == 6:   # a training call: MXNet's graph and backward
            for block in (imperative, dynamic):
                with autograd.record():
                    block(*args).sum().backward()
            np.testing.assert_allclose(dynamic.out.weight.grad().asnumpy(),
                                       imperative.out.weight.grad().asnumpy(), rtol=1e-5,
                                       atol=1e-6)
    report = gluon_dyn.hybridize.report(dynamic)
    assert report["fallback"] is None
    for plan in report["tvm"]["plans"]:
        assert plan["runs"] == "segments" and all(
            segment["backend"] == "tvm" for segment in plan["segments"]
            if segment["convertible"])
    return report["tvm"]


def test_dynamic_block_on_tvm_matches_imperative_and_trains_in_mxnet(tmp_path, monkeypatch):
    tvm = run_tagger(FixedTagger, [None] * 9, tmp_path, monkeypatch)
    assert tvm["failures"] == [] and tvm["plans"], "no inference call ran through a TVM plan"
    assert tvm["plans"][0]["segments"][0]["convertible"]


def test_a_graph_loop_runs_in_mxnet_between_the_plan_segments(tmp_path, monkeypatch):
    # The while_loop's output shapes are known to MXNet only at run time: what
    # follows it is typed by running the graph (tests/test_tvm_dynamic_control_flow.py).
    tvm = run_tagger(Tagger, [1, 1, 1, 1, 0, 2, 1, 1], tmp_path, monkeypatch)
    assert tvm["failures"] == []
    assert any(segment["op_names"] == {"_while_loop": 1} for plan in tvm["plans"]
               for segment in plan["segments"])


def test_unknown_backend_is_an_error():
    with pytest.raises(ValueError, match="backend is one of 'mxnet', 'tvm'"):
        Tagger().hybridize(dynamic=True, backend="cuda")
