"""SegmentedGraph: TVM segments and MXNet CachedOps in one plan, run on NDArrays;
and hybridize(dynamic=True, backend="tvm"). Results only: which backend wins a
measurement is never asserted (timing never decides a test)."""
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_dyn
from tvm_bridge import SegmentedGraph
from tvm_bridge.converters import registry
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
    assert report["failures"] == []
    assert [s["convertible"] for s in report["segments"]] == [True, False, True]
    assert "_contrib_quadratic" in report["segments"][1]["op_names"]
    if not choose:   # every segment TVM compiled runs on TVM
        assert [s["backend"] for s in report["segments"]] == ["tvm", "mxnet", "tvm"]
        assert report["calls"] == {"plan": 1, "whole graph": 0}
        return
    # Measured: each TVM segment ran on TVM and in MXNet, and the faster serves.
    for segment in report["segments"][::2]:
        assert set(segment["times_ms"]) == {"tvm", "mxnet"}
        assert segment["backend"] == segment["choice"]["chosen"]
    assert report["segments"][1]["backend"] == "mxnet"
    last = report["choice"]["history"][-1]["times_ms"]
    assert (report["plan_ms"], report["whole_graph_mxnet_ms"]) == (
        last["plan"], last["whole graph"])
    assert report["runs"] == ("segments" if report["choice"]["chosen"] == "plan" else
                              "one MXNet graph (measured faster than the plan)")


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
    with pytest.warns(UserWarning) as said:
        plan = SegmentedGraph(symbol, symbol.list_inputs(), arrays, cache_dir=str(tmp_path))
    assert_outputs_close(run_plan(plan, symbol, inputs), run_mxnet(symbol, inputs))
    report = plan.report()
    assert [s["backend"] for s in report["segments"]] == ["mxnet"] * 3
    reasons = report["segments"][0]["reasons"]
    assert note in reasons[-1] and "injected failure" in reasons[-1]
    # Both TVM segments failed: both are listed, the first said once.
    stage = "compile" if "compile" in note else "run"
    assert [(f["stage"], f["why"]) for f in report["failures"]] == [
        (stage, "RuntimeError: injected failure")] * 2
    assert report["failures"][0]["what"].endswith("the segment of FullyConnected, tanh")
    assert [str(w.message) for w in said if "TVM failed" in str(w.message)] == [
        "gluon_dyn: TVM failed %s (RuntimeError: injected failure), so MXNet runs the segment; "
        "later failures are listed in the report without a warning"
        % report["failures"][0]["what"]]


def raise_type_error(ctx, node, args):
    raise TypeError("a converter bug")


def test_a_converter_that_raises_is_reported_and_its_op_runs_in_mxnet(tmp_path, monkeypatch):
    for op in ("tanh", "elemwise_add"):
        monkeypatch.setitem(registry._CONVERTERS, op, raise_type_error)
    symbol = quadratic_in_the_middle()
    inputs = make_inputs(symbol, SHAPES)
    arrays = [mx.nd.array(inputs[name]) for name in symbol.list_inputs()]
    with pytest.warns(UserWarning) as said:
        plan = SegmentedGraph(symbol, symbol.list_inputs(), arrays, cache_dir=str(tmp_path),
                              choose_by_measurement=False)
    assert_outputs_close(run_plan(plan, symbol, inputs), run_mxnet(symbol, inputs))
    report = plan.report()
    assert [(s["backend"], s["op_names"]) for s in report["segments"]] == [
        ("tvm", {"FullyConnected": 1}), ("mxnet", {"tanh": 1}),
        ("mxnet", {"_contrib_quadratic": 1}), ("tvm", {"FullyConnected": 1}),
        ("mxnet", {"elemwise_add": 1})]
    # The op without a converter is a graph break, not a failure.
    assert [(f["stage"], f["what"].split(" (")[0], f["why"]) for f in report["failures"]] == [
        ("converter", "converting op 'tanh'", "TypeError: a converter bug"),
        ("converter", "converting op 'elemwise_add'", "TypeError: a converter bug")]
    assert len([w for w in said if "TVM failed" in str(w.message)]) == 1


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


class Squashed(gluon.Block):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(3, in_units=4)

    def forward(self, x):
        return mx.nd.tanh(self.dense(x)) * 2


def run_squashed(tmp_path, batches):
    """Imperative vs dynamic on TVM (every compiled segment kept there) over calls
    of these batch sizes; returns the dynamic block's report and the warnings."""
    imperative, dynamic = Squashed(), Squashed()
    for block in (imperative, dynamic):
        block.initialize(mx.init.Uniform(0.5))
    dynamic.dense.weight.set_data(imperative.dense.weight.data())
    dynamic.dense.bias.set_data(imperative.dense.bias.data())
    dynamic.hybridize(dynamic=True, backend="tvm", backend_options={
        "cache_dir": str(tmp_path), "choose_by_measurement": False})
    rng = np.random.RandomState(0)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        for batch in batches:
            x = mx.nd.array(rng.randn(batch, 4))
            np.testing.assert_allclose(dynamic(x).asnumpy(), imperative(x).asnumpy(),
                                       rtol=1e-5, atol=1e-6)
    return gluon_dyn.hybridize.report(dynamic), said


def test_a_block_says_its_first_tvm_failure_once_and_reports_every_one(tmp_path, monkeypatch):
    monkeypatch.setitem(registry._CONVERTERS, "tanh", raise_type_error)
    report, said = run_squashed(tmp_path, (2, 2, 2, 2, 2, 5, 5, 5))
    plans = report["tvm"]["plans"]
    assert [[s["backend"] for s in plan["segments"]] for plan in plans] == [
        ["tvm", "mxnet", "tvm"]] * len(plans) and len(plans) == 2, plans
    # After 3 profiled calls, each graph's first call runs in MXNet and builds its plan,
    # which serves its later calls: 1 of batch 2, 2 of batch 5.
    assert [plan["calls"]["plan"] for plan in plans] == [1, 2]
    assert [(f["stage"], f["why"]) for f in report["tvm"]["failures"]] == [
        ("converter", "TypeError: a converter bug")] * 2
    (warning,) = [w for w in said if "TVM failed converting op 'tanh'" in str(w.message)]
    assert warning.filename == __file__   # said at the user's call


def test_a_plan_that_cannot_be_built_is_reported_and_mxnet_runs_the_graph(tmp_path,
                                                                          monkeypatch):
    monkeypatch.setattr("tvm_bridge.segmented.partition", fail)
    report, said = run_squashed(tmp_path, (2, 2, 2, 2, 2, 2))
    # Tried once, after the first graph call; the graph then serves the later calls.
    assert report["tvm"]["plans"] == [] and report["tvm"]["failures"] == [
        {"stage": "plan", "what": "building a plan", "why": "RuntimeError: injected failure",
         "instead": "MXNet runs the graph"}]
    assert report["calls"]["graph"] == 3
    assert len([w for w in said if "TVM failed building a plan" in str(w.message)]) == 1


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
    assert report["fallback"] is None and report["tvm"]["failures"] == []
    for plan in report["tvm"]["plans"]:
        assert plan["runs"] == "segments" and all(
            segment["backend"] == "tvm" for segment in plan["segments"]
            if segment["convertible"])
    return report


def test_dynamic_block_on_tvm_matches_imperative_and_trains_in_mxnet(tmp_path, monkeypatch):
    report = run_tagger(FixedTagger, [None] * 9, tmp_path, monkeypatch)
    (plan,) = report["tvm"]["plans"]
    assert [segment["backend"] for segment in plan["segments"]] == ["tvm"]
    # 3 profiled calls; the 4th traces the graph, runs it in MXNet and builds the
    # plan, which serves the other 5 inference calls; the training call is MXNet's.
    assert plan["calls"] == {"plan": 5, "whole graph": 0}
    assert report["calls"]["graph"] == 9 + 1 - 3


def test_a_graph_loop_runs_in_mxnet_between_the_plan_segments(tmp_path, monkeypatch):
    # The while_loop's output shapes are known to MXNet only at run time: what
    # follows it is typed by running the graph (tests/test_tvm_dynamic_control_flow.py).
    report = run_tagger(Tagger, [1, 1, 1, 1, 0, 2, 1, 1], tmp_path, monkeypatch)
    (plan,) = [plan for plan in report["tvm"]["plans"]
               if any(segment["op_names"] == {"_while_loop": 1} for segment in plan["segments"])]
    assert [segment["backend"] for segment in plan["segments"]] == ["tvm", "mxnet", "tvm"]
    # Trip counts of 1 profiled: the loop is unrolled once, guarded; the 4th call
    # builds that graph's plan, under which the 5th (0 trips) fails its guard. The
    # 6th traces the while_loop, runs it in MXNet and builds this plan, which serves
    # the last 2 inference calls; the training call is MXNet's.
    assert plan["calls"] == {"plan": 2, "whole graph": 0}
    assert report["calls"]["by_kind"]["guard_failed"] == 1 and report["calls"]["graph"] == 5


def test_unknown_backend_is_an_error():
    with pytest.raises(ValueError, match="backend is one of 'mxnet', 'tvm'"):
        Tagger().hybridize(dynamic=True, backend="cuda")
