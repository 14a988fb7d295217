"""check_speed (on by default): the graph serves only where it measured faster than
the forward as written, by measure.MeasuredChoice's policy (a margin, confirmed
twice; re-checked later). Either way every call's result equals imperative
execution, including the timed calls that run as Python. The policy itself is
tested with injected timings; which variant wins on this machine is never asserted."""
import mxnet as mx
import numpy as np

import gluon_dyn
from gluon_dyn.hybridize import speed_check
from gluon_dyn.measure import MIN_SAMPLES
from storm_programs import AlternatingBranch


def test_the_check_times_both_and_results_stay_right(monkeypatch):
    monkeypatch.setattr(speed_check, "ENABLED_BY_DEFAULT", True)
    imperative, dynamic = AlternatingBranch(), AlternatingBranch()
    for block in (imperative, dynamic):
        block.initialize(mx.init.Constant(0.05))
    dynamic.hybridize(dynamic=True)
    for call in range(3 + 1 + 4 * MIN_SAMPLES + 8):
        args = imperative.arguments(call)
        np.testing.assert_allclose(dynamic(*args).asnumpy(), imperative(*args).asnumpy(),
                                   rtol=1e-5)
    check = gluon_dyn.hybridize.report(dynamic)["speed_check"]
    (first, *_) = check["history"]
    assert set(first["times_ms"]) == {"graph", "python"}
    assert first["samples"] == {"graph": MIN_SAMPLES, "python": MIN_SAMPLES}
    assert check["state"] in ("graph chosen", "forward as written chosen") or \
        check["state"].startswith("measuring")


def decided(graph_ms, python_ms, rounds):
    """A check fed `rounds` measurements with these timings; its state."""
    check = speed_check.SpeedCheck(enabled=True)
    for round_ in range(rounds):
        while check.measuring and len(check.choice.history) == round_:
            variant, timed = check.next_variant()
            assert timed
            check.record(variant, (graph_ms if variant == "graph" else python_ms) / 1000)
    return check


def test_a_graph_serves_only_once_it_measured_faster_twice():
    assert decided(graph_ms=1.0, python_ms=2.0, rounds=1).measuring     # confirming
    faster = decided(graph_ms=1.0, python_ms=2.0, rounds=2)
    assert not faster.measuring and faster.next_variant()[0] == "graph"
    slower = decided(graph_ms=3.0, python_ms=2.0, rounds=1)
    assert slower.serves_python() and slower.next_variant()[0] == "python"
    # Within the margin the forward as written stays.
    assert decided(graph_ms=1.99, python_ms=2.0, rounds=2).serves_python()
    assert speed_check.SpeedCheck(enabled=False).next_variant() is None


def test_a_recorded_call_is_timed_until_the_next_call_starts(monkeypatch):
    """Training: most of a recorded call's cost comes after it returns (its
    backward), so its time runs from its start to the next call's."""
    clock = iter([10.0, 10.5, 11.0, 12.0])   # call 1 starts, call 2 starts, ...
    monkeypatch.setattr(speed_check.time, "perf_counter", lambda: next(clock))
    check = speed_check.SpeedCheck(enabled=True)
    variant, timed = check.next_variant()
    assert timed
    with mx.autograd.record():
        assert check.timed(variant, lambda: "out") == "out"
    assert check.samples == {"graph": [], "python": []}   # its backward may still run
    second, _ = check.next_variant()                      # the next call: 0.5 s
    assert check.samples[variant] == [0.5]
    with mx.autograd.record():
        check.timed(second, lambda: None)
    check.next_variant()                                  # 11.0 -> 12.0
    assert check.samples[second] == [1.0]
    # Outside autograd a call is timed alone, to completion.
    monkeypatch.setattr(speed_check, "timed_ms", lambda run: (run(), 3.0))
    third, _ = check.next_variant()
    check.timed(third, lambda: None)
    assert check.samples[third][-1] == 0.003
