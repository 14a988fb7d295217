"""Guard storms (tests/storm_programs.py): assumptions that fail on every call.
Results stay equal to imperative execution, the graph cache stays bounded, and
speculation turns itself off where it keeps failing, visibly in the report.
(Their cost is measured by benchmarks/guard_storms.py, never here.)"""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd

import gluon_dyn
from gluon_dyn.hybridize.call.cache_key import MAX_GRAPHS
from storm_programs import (STORMS, AlternatingBranch, ChangingPythonValue, ChangingShapeRead,
                            ChangingShapeUnread, ChangingTripCount)

CALLS = 40


def run_storm(storm, **hybridize_options):
    imperative, dynamic = storm(), storm()
    for block in (imperative, dynamic):
        block.initialize(mx.init.Constant(0.05))
    dynamic.hybridize(dynamic=True, **hybridize_options)
    largest_cache = 0
    for call in range(CALLS):
        outputs, grads = [], []
        for block in (imperative, dynamic):
            block.prepare_call(call)
            args = block.arguments(call)
            args[0].attach_grad()
            # A call that skips the layer leaves its stale gradient imperatively and
            # writes zeros from a graph: compare fresh gradients.
            block.collect_params().zero_grad()
            with autograd.record():
                out = block(*args)
            out.backward()
            outputs.append(out.asnumpy())
            grads.append(block.dense.weight.grad().asnumpy())
        np.testing.assert_allclose(outputs[1], outputs[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(grads[1], grads[0], rtol=1e-5, atol=1e-6)
        largest_cache = max(largest_cache, gluon_dyn.hybridize.report(dynamic)["cached_graphs"])
    return gluon_dyn.hybridize.report(dynamic), largest_cache


@pytest.mark.parametrize("storm", STORMS, ids=lambda storm: storm.__name__)
def test_storm_results_equal_imperative_and_cache_stays_bounded(storm):
    _, largest_cache = run_storm(storm)
    assert largest_cache <= MAX_GRAPHS


@pytest.mark.parametrize("storm", [AlternatingBranch, ChangingTripCount])
def test_profiling_sees_the_storm_and_does_not_speculate(storm):
    report, _ = run_storm(storm)
    assert report["guard_failures"] == [] and report["cached_graphs"] == 1
    [fate] = report["statements"].values()
    assert "(graph)" in fate and "speculated" not in fate


@pytest.mark.parametrize("storm", [AlternatingBranch, ChangingTripCount])
def test_failing_assumption_is_no_longer_made(storm):
    # Speculating from one profiled call, allowing 3 failures: the assumption is
    # re-profiled after each failure and dropped after the third.
    report, _ = run_storm(storm, profile_calls=1, max_guard_failures=3)
    assert len(report["guard_failures"]) == 3 and report["fallback"] is None
    [(where, why)] = report["not_speculated"].items()
    assert "storm_programs.py" in where and "failed 3 times" in why
    [fate] = report["statements"].values()
    assert "(graph)" in fate and "speculated" not in fate


def test_shape_never_read_is_relaxed_to_one_graph():
    report, _ = run_storm(ChangingShapeUnread)
    assert report["fallback"] is None and report["traces"] <= 3


@pytest.mark.parametrize("storm", [ChangingShapeRead, ChangingPythonValue])
def test_a_new_graph_per_call_gives_way_to_python(storm):
    report, _ = run_storm(storm)
    assert "differs on most calls" in report["fallback"]
    assert report["traces"] <= 9
