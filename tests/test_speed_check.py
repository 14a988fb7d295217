"""check_speed (on by default): a graph measured slower than the forward as
written is dropped; one measured faster is kept. Either way every call's result
equals imperative execution, including the timed calls that run as Python."""
import mxnet as mx
import numpy as np

import gluon_dyn
from gluon_dyn.hybridize import speed_check
from storm_programs import AlternatingBranch


def test_the_check_times_both_and_results_stay_right(monkeypatch):
    monkeypatch.setattr(speed_check, "ENABLED_BY_DEFAULT", True)
    imperative, dynamic = AlternatingBranch(), AlternatingBranch()
    for block in (imperative, dynamic):
        block.initialize(mx.init.Constant(0.05))
    dynamic.hybridize(dynamic=True)
    for call in range(3 + 1 + 2 * speed_check.SAMPLES + 4):
        args = imperative.arguments(call)
        np.testing.assert_allclose(dynamic(*args).asnumpy(), imperative(*args).asnumpy(),
                                   rtol=1e-5)
    report = gluon_dyn.hybridize.report(dynamic)
    check = report["speed_check"]
    assert check["graph_ms"] and check["python_ms"]
    if check["graph_ms"] > check["python_ms"]:
        assert "measured slower" in report["fallback"] and check["state"] == "graph dropped (slower)"
    else:
        assert report["fallback"] is None and check["state"] == "graph kept (faster)"


def check_with_times(graph_ms, python_ms):
    """A finished check whose timed calls took these times."""
    check = speed_check.SpeedCheck(enabled=True)
    while check.next_variant():
        variant = check.next_variant()
        check.timed(variant, lambda: None)
        check.times[variant][-1] = graph_ms if variant == "graph" else python_ms
    return check


def test_a_faster_graph_is_kept_and_a_slower_one_dropped():
    assert not check_with_times(graph_ms=1.0, python_ms=2.0).graph_is_slower()
    assert check_with_times(graph_ms=3.0, python_ms=2.0).graph_is_slower()
    assert speed_check.SpeedCheck(enabled=False).next_variant() is None
