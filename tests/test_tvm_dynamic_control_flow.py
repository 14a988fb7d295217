"""hybridize(dynamic=True, backend="tvm") on graphs that keep a `_while_loop` or
`_cond` node: a `_cond` whose branches convert runs on TVM as a relax.If; a
`_while_loop` (or a `_cond` with a branch that does not convert) runs in MXNet
as its own segment, the static work before and after it on TVM, typed by
running the graph on the first call's inputs.
Results must match the imperative block on every path; which backend measures
faster is never asserted (the plans keep every segment TVM compiles)."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon

import gluon_dyn
import tvm_helpers  # noqa: F401  (TVM's thread settings)
from tvm_bridge import SegmentedGraph, load_graph, partition
from tvm_bridge import value_types

STEPS, HIDDEN = 6, 8


class LoopAfterLstm(gluon.Block):
    """An unrolled LSTM, a refinement loop whose trip count is data, dense layers."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = gluon.rnn.LSTMCell(HIDDEN, input_size=4)
            self.hidden = gluon.nn.Dense(HIDDEN, in_units=HIDDEN, activation="relu")
            self.out = gluon.nn.Dense(3, in_units=HIDDEN)

    def forward(self, seq, budget):
        state = [mx.nd.zeros((1, HIDDEN)), mx.nd.zeros((1, HIDDEN))]
        for t in range(seq.shape[0]):
            y, state = self.cell(seq[t], state)
        while mx.nd.sum(budget) > 0:  # budget's two halves: one trip per unit
            y = mx.nd.tanh(y) * 1.5
            budget = budget - 0.5
        return mx.nd.softmax(self.out(self.hidden(y)))


class BranchBetweenDense(gluon.Block):
    """Dense layers, a branch on the data between two more, a dense head."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.first = gluon.nn.Dense(HIDDEN, in_units=4, activation="tanh")
            self.left = gluon.nn.Dense(HIDDEN, in_units=HIDDEN)
            self.right = gluon.nn.Dense(HIDDEN, in_units=HIDDEN, activation="relu")
            self.out = gluon.nn.Dense(3, in_units=HIDDEN)

    def forward(self, x):
        y = self.first(x)
        if mx.nd.sum(y) > 0:
            y = self.left(y)
        else:
            y = self.right(y) * 2
        return self.out(y)


def twins(cls, tmp_path, **hybridize_options):
    """An imperative block and a copy with the same parameters, hybridized dynamic
    on TVM."""
    imperative, dynamic = cls(), cls()
    imperative.initialize(mx.init.Uniform(0.5))
    dynamic.initialize()
    for a, b in zip(imperative.collect_params().values(), dynamic.collect_params().values()):
        b.set_data(a.data())
    dynamic.hybridize(dynamic=True, backend="tvm", backend_options={
        "cache_dir": str(tmp_path), "choose_by_measurement": False}, **hybridize_options)
    return imperative, dynamic


def run_against_imperative(blocks, calls):
    """Each call's arguments through both blocks, results compared; returns the
    dynamic block's report."""
    imperative, dynamic = blocks
    for args in calls:
        np.testing.assert_allclose(dynamic(*args).asnumpy(), imperative(*args).asnumpy(),
                                   rtol=1e-5, atol=1e-5)
    report = gluon_dyn.hybridize.report(dynamic)
    assert report["fallback"] is None
    assert report["tvm"]["failures"] == []
    return report


def loop_calls(trips):
    # The budget: two halves of the trip count (LoopAfterLstm sums them).
    rng = np.random.RandomState(0)
    return [(mx.nd.array(rng.randn(STEPS, 1, 4)), mx.nd.array([count / 2, count / 2]))
            for count in trips]


def plan_holding(plans, op):
    """The first plan with a segment holding `op` (asserted to exist)."""
    holding = [plan for plan in plans
               if any(op in segment["op_names"] for segment in plan["segments"])]
    assert holding, "no plan has a segment with %s: %s" % (op, plans)
    return holding[0]


def unspeculated_plan(report, op):
    """The plan of a block hybridized with speculate=False (nothing profiled) over 6
    calls of one shape: the first traces, runs in MXNet and builds it; it serves the
    other 5, segment by segment."""
    plan = plan_holding(report["tvm"]["plans"], op)
    assert plan["calls"] == {"plan": 5, "whole graph": 0}
    assert report["calls"]["graph"] == 6
    return plan


def assert_split_around(segments, op):
    """`op` runs in MXNet alone; TVM runs a segment after it, on types found by running."""
    (alone,) = [segment for segment in segments if op in segment["op_names"]]
    assert alone["backend"] == "mxnet" and alone["op_names"] == {op: 1}
    after = segments[segments.index(alone) + 1:]
    on_tvm = [segment for segment in after if segment["backend"] == "tvm"]
    assert on_tvm, "nothing after %s runs on TVM: %s" % (op, segments)
    assert any("typed by running the graph" in reason for segment in on_tvm
               for reason in segment["reasons"])


def test_an_unspeculated_while_loop_runs_in_mxnet_between_tvm_segments(tmp_path):
    report = run_against_imperative(twins(LoopAfterLstm, tmp_path, speculate=False),
                                    loop_calls([0, 2, 5, 1, 0, 3]))
    segments = unspeculated_plan(report, "_while_loop")["segments"]
    assert_split_around(segments, "_while_loop")
    before = segments[0]
    assert before["backend"] == "tvm" and before["op_names"]["FullyConnected"] == 2 * STEPS


def branch_calls():
    rng = np.random.RandomState(1)
    return [(mx.nd.array(rng.randn(2, 4) * scale),) for scale in (3, -3, -3, 3, 3, -3)]


def test_an_unspeculated_cond_whose_branches_convert_runs_inside_one_tvm_segment(tmp_path):
    """Both branches on TVM (a relax.If): the plan is one segment, no MXNet between."""
    report = run_against_imperative(twins(BranchBetweenDense, tmp_path, speculate=False),
                                    branch_calls())
    (segment,) = unspeculated_plan(report, "_cond")["segments"]
    assert segment["backend"] == "tvm" and segment["reasons"] == []
    assert segment["op_names"]["_cond"] == 1 and segment["op_names"]["FullyConnected"] == 2


class UnconvertibleBranch(BranchBetweenDense):
    """The same, with an op that has no TVM converter in one branch."""

    def forward(self, x):
        y = self.first(x)
        if mx.nd.sum(y) > 0:
            y = mx.nd.contrib.quadratic(self.left(y), a=0.5)
        else:
            y = self.right(y) * 2
        return self.out(y)


def test_a_cond_with_a_branch_that_does_not_convert_runs_in_mxnet_between_tvm_segments(
        tmp_path):
    report = run_against_imperative(twins(UnconvertibleBranch, tmp_path, speculate=False),
                                    branch_calls())
    segments = unspeculated_plan(report, "_cond")["segments"]
    assert_split_around(segments, "_cond")
    assert segments[0]["backend"] == "tvm"
    (alone,) = [segment for segment in segments if "_cond" in segment["op_names"]]
    assert any("_contrib_quadratic" in reason for reason in alone["reasons"])


def test_guards_fail_under_the_plan_and_the_relaxed_loop_gets_one(tmp_path):
    blocks = twins(LoopAfterLstm, tmp_path)
    # Profiled trip counts of 2 make a speculated graph (the loop unrolled, guarded),
    # whose plan is built after its first run and serves the next calls.
    calls = loop_calls([2] * 6 + [4, 0, 2, 3])
    report = run_against_imperative(blocks, calls[:6])
    (speculated,) = report["tvm"]["plans"]
    # The guards are ordinary comparisons, compiled with the rest: one TVM segment,
    # built after the 4th call (the first after 3 profiled), serving the next 2.
    assert [segment["backend"] for segment in speculated["segments"]] == ["tvm"]
    assert speculated["calls"] == {"plan": 2, "whole graph": 0}
    # A trip count of 4 fails a guard under the plan; the loop is then kept as a
    # _while_loop, whose graph gets a plan of its own.
    report = run_against_imperative(blocks, calls[6:])
    assert report["guard_failures"] and report["not_speculated"]
    (loop_plan,) = report["tvm"]["plans"]
    assert_split_around(loop_plan["segments"], "_while_loop")
    # Built after the 8th call, which traced the loop and ran in MXNet: serves the last 2.
    assert loop_plan["calls"] == {"plan": 2, "whole graph": 0}
    assert report["calls"]["by_kind"]["guard_failed"] == 1


def while_loop_graph():
    """x -> fc -> tanh repeated `n` times (data) -> fc: a symbol for SegmentedGraph."""
    x, n = mx.sym.var("x"), mx.sym.var("n")
    hidden = mx.sym.FullyConnected(x, num_hidden=4, name="fc_in")
    _, (refined, _) = mx.sym.contrib.while_loop(
        lambda h, i: i < n, lambda h, i: (None, (mx.sym.tanh(h) * 1.5, i + 1)),
        [hidden, mx.sym.zeros((1,))], max_iterations=8, name="refine")
    return mx.sym.FullyConnected(refined, num_hidden=2, name="fc_out")


def while_loop_inputs(trips):
    rng = np.random.RandomState(trips)
    symbol = while_loop_graph()
    shapes = {"x": (3, 5), "n": (1,), "fc_in_weight": (4, 5), "fc_in_bias": (4,),
              "fc_out_weight": (2, 4), "fc_out_bias": (2,)}
    return symbol, [mx.nd.array([trips]) if name == "n" else
                    mx.nd.array(rng.uniform(-1, 1, shapes[name]))
                    for name in symbol.list_inputs()]


def mxnet_outputs(symbol, arrays):
    return mx.nd.CachedOp(symbol)(*arrays).asnumpy()


def test_a_call_whose_typed_values_differ_runs_as_one_mxnet_graph(tmp_path, monkeypatch):
    observe = value_types.observe_types

    def observed_wrongly(graph, refs, example_inputs):
        return {ref: ((shape[0] + 1,) + shape[1:], dtype) if graph.nodes[ref[0]].op ==
                "_while_loop" else (shape, dtype)
                for ref, (shape, dtype) in observe(graph, refs, example_inputs).items()}

    monkeypatch.setattr(value_types, "observe_types", observed_wrongly)
    symbol, arrays = while_loop_inputs(2)
    plan = SegmentedGraph(symbol, symbol.list_inputs(), arrays, cache_dir=str(tmp_path),
                          choose_by_measurement=False)
    assert [segment["backend"] for segment in plan.report()["segments"]] == [
        "tvm", "mxnet", "tvm"]
    for trips in (2, 5):
        symbol, arrays = while_loop_inputs(trips)
        np.testing.assert_allclose(plan(*arrays)[0].asnumpy(), mxnet_outputs(symbol, arrays),
                                   rtol=1e-5, atol=1e-5)
    report = plan.report()
    changed = report["types_changed"]
    assert changed["calls"] == 2 and "compiled for (4, 4)" in changed["last"][-1]
    assert report["calls"] == {"plan": 0, "whole graph": 2} and report["failures"] == []


def test_a_plan_around_a_while_loop_matches_mxnet(tmp_path):
    symbol, arrays = while_loop_inputs(2)
    plan = SegmentedGraph(symbol, symbol.list_inputs(), arrays, cache_dir=str(tmp_path),
                          choose_by_measurement=False)
    for trips in (0, 3, 8):
        symbol, arrays = while_loop_inputs(trips)
        np.testing.assert_allclose(plan(*arrays)[0].asnumpy(), mxnet_outputs(symbol, arrays),
                                   rtol=1e-5, atol=1e-5)
    report = plan.report()
    assert [segment["backend"] for segment in report["segments"]] == ["tvm", "mxnet", "tvm"]
    assert report["calls"] == {"plan": 3, "whole graph": 0} and report["failures"] == []
    assert report["types_changed"]["calls"] == 0


def test_what_typing_by_running_cannot_do_is_refused_clearly(tmp_path):
    symbol, arrays = while_loop_inputs(2)
    shapes = {name: array.shape for name, array in zip(symbol.list_inputs(), arrays)}
    with pytest.raises(ValueError, match="cannot be symbolic"):
        SegmentedGraph(symbol, symbol.list_inputs(), arrays, symbolic_dims={"x": {0: "batch"}})
    with pytest.raises(ValueError, match=r"example arrays for every input \(missing: x, fc_in_weight"):
        partition(load_graph(symbol), shapes)
    with pytest.raises(ValueError, match=r"give the shape of every input \(missing: fc_in_"):
        partition(load_graph(symbol), {"x": (3, 5), "n": (1,)})
