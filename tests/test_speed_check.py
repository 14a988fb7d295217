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
