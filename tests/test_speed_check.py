"""check_speed (on by default): the graph serves only where it measured faster than
the forward as written, by measure.MeasuredChoice's policy (a margin, confirmed
twice; re-checked later). Either way every call's result equals imperative
execution, including the timed calls that run as Python. The policy itself is
tested with injected timings; which variant wins on this machine is never asserted."""
import contextlib

import mxnet as mx
import numpy as np
import pytest

import gluon_dyn
from gluon_dyn.hybridize.call import runner as runner_module
from gluon_dyn.hybridize.timing import speed_check
from gluon_dyn.measure import MIN_SAMPLES
from storm_programs import AlternatingBranch
from test_planned_backward import twin_blocks


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
    # 4 * MIN_SAMPLES calls hold the first measurement and its confirmation: the
    # choice is made, and the state names it unless a re-check has begun since.
    last = check["history"][-1]
    assert len(check["history"]) <= 2 and last["chosen"] == check["chosen"]
    chosen = "%s chosen" % {"graph": "graph", "python": "forward as written"}[check["chosen"]]
    assert check["state"] == chosen or (
        check["state"].startswith("measuring (") and "first measurement" not in
        check["state"] and "confirming" not in check["state"]), check


def decided(graph_ms, python_ms, rounds, returned_ms=None):
    """A check fed `rounds` measurements with these timings (and, if given,
    `returned_ms`: variant -> milliseconds until its calls returned); its state."""
    check = speed_check.SpeedCheck(enabled=True)
    for round_ in range(rounds):
        while check.measuring and len(check.choice.history) == round_:
            variant, timed = check.next_variant()
            assert timed
            check.record(variant, (graph_ms if variant == "graph" else python_ms) / 1000,
                         None, returned_ms and returned_ms[variant] / 1000)
    return check


def test_a_graph_serves_only_once_it_measured_faster_twice():
    assert decided(graph_ms=1.0, python_ms=2.0, rounds=1).measuring     # confirming
    faster = decided(graph_ms=1.0, python_ms=2.0, rounds=2)
    assert not faster.measuring and faster.next_variant()[0] == "graph"
    slower = decided(graph_ms=3.0, python_ms=2.0, rounds=1)
    assert slower.serves_python() and slower.next_variant()[0] == "python"
    # Within the margin the forward as written stays, unless the graph's calls return
    # to the caller much sooner (its work goes on in MXNet while the caller runs on).
    assert decided(graph_ms=1.99, python_ms=2.0, rounds=2).serves_python()
    sooner = decided(graph_ms=2.05, python_ms=2.0, rounds=2,
                     returned_ms={"graph": 0.2, "python": 1.5})
    assert not sooner.measuring and sooner.next_variant()[0] == "graph"
    assert sooner.choice.history[-1]["returned_ms"] == {"graph": pytest.approx(0.2),
                                                        "python": pytest.approx(1.5)}
    assert speed_check.SpeedCheck(enabled=False).next_variant() is None


def test_recorded_and_inference_calls_are_compared_like_with_like():
    """A block called once recorded and once for inference in each step (a GAN's
    generator): alternating over all its calls gave the graph every recorded call and
    the forward as written every inference call, and the forward as written won on
    the cheaper calls. Each kind alternates on its own, and a measurement compares
    calls of one kind: here the graph, faster in both kinds, is chosen."""
    ms = {(speed_check.RECORDED, "graph"): 0.9, (speed_check.RECORDED, "python"): 1.0,
          (speed_check.INFERENCE, "graph"): 0.4, (speed_check.INFERENCE, "python"): 0.5}
    check = speed_check.SpeedCheck(enabled=True)
    for _ in range(50):
        for kind in (speed_check.RECORDED, speed_check.INFERENCE):
            with mx.autograd.record(train_mode=False) if kind == speed_check.RECORDED \
                    else contextlib.nullcontext():
                variant, timed = check.next_variant()
            assert timed == check.measuring or not check.measuring
            if check.measuring:
                check.record(variant, ms[kind, variant] / 1000, kind)
        if not check.measuring:
            break
    assert not check.measuring and check.next_variant()[0] == "graph"
    assert all(entry["chosen"] == "python" or entry["times_ms"]["graph"] <
               entry["times_ms"]["python"] for entry in check.choice.history)


class Recurrent(mx.gluon.Block):
    """A loop over a Dense with a BatchNorm: trainable parameters, and running
    statistics the forward updates."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.step = mx.gluon.nn.Dense(4, in_units=4)
            self.norm = mx.gluon.nn.BatchNorm(in_channels=4)

    def forward(self, x):
        for _ in range(3):
            x = mx.nd.tanh(self.step(x))
        return self.norm(x)


def test_recorded_calls_are_timed_with_their_backward(monkeypatch):
    """A recorded call's sample is its forward plus the span from its outputs'
    gradients to the end of the backward that reached them (an injected clock
    ticking one second per reading), taken when that backward ends (a decision
    it completes serves the next call); gradients and BatchNorm's statistics are
    those of imperative runs."""
    from gluon_dyn.hybridize.passes import backward_timing
    ticks = iter(range(1, 10 ** 6))
    monkeypatch.setattr(backward_timing, "clock", lambda: float(next(ticks)))
    monkeypatch.setattr(speed_check, "ENABLED_BY_DEFAULT", True)
    imperative, dynamic = twin_blocks(Recurrent)
    runner = gluon_dyn.hybridize.call.dynamic.runner_of(dynamic)
    recorded = []
    record = runner.speed_check.record
    monkeypatch.setattr(runner.speed_check, "record",
                        lambda variant, seconds, kind=None, returned=None: (
                            recorded.append((variant, seconds, kind)),
                            record(variant, seconds, kind, returned)))
    weights = mx.nd.array(np.random.RandomState(0).standard_normal((8, 4)))
    for call in range(3 + 1 + 2 * MIN_SAMPLES + 1):
        x = mx.nd.array(np.random.RandomState(call).standard_normal((8, 4)))
        for block in (imperative, dynamic):
            with mx.autograd.record():
                loss = (block(x) * weights).sum()
            loss.backward()
        assert not runner.speed_check.pending, call
        for (name, a), (_, b) in zip(sorted(imperative.collect_params().items()),
                                     sorted(dynamic.collect_params().items())):
            np.testing.assert_allclose(b.data().asnumpy(), a.data().asnumpy(), rtol=1e-5,
                                       atol=1e-5, err_msg=name)
            if a.grad_req != "null":
                np.testing.assert_allclose(b.grad().asnumpy(), a.grad().asnumpy(),
                                           rtol=1e-5, atol=1e-5, err_msg=name)
    timed = [(variant, seconds) for variant, seconds, kind in recorded if seconds is not None]
    assert len(timed) >= 2 * MIN_SAMPLES and {v for v, _ in timed} == {"graph", "python"}
    assert {kind for _, seconds, kind in recorded if seconds is not None} == {
        speed_check.RECORDED}
    # outputs noted first, then the backward's end: 1 second after
    assert all(1.0 <= seconds < 1.5 for _, seconds in timed), timed


def test_a_recorded_call_without_backward_counts_its_forward(monkeypatch):
    monkeypatch.setattr(speed_check, "ENABLED_BY_DEFAULT", True)
    check = speed_check.SpeedCheck()
    variant, timed = check.next_variant()
    weight = mx.nd.ones((2,))
    weight.attach_grad()
    with mx.autograd.record():
        out = check.timed(variant, lambda: weight * 2)
    assert isinstance(out, mx.nd.NDArray) and check.pending
    for _ in range(speed_check.BACKWARD_WAIT_CALLS):
        check.next_variant()
        assert check.pending
    check.next_variant()
    assert not check.pending and len(check.samples[speed_check.RECORDED][variant]) == 1


def test_timing_a_recorded_call_leaves_arrays_without_history_as_they_are():
    """An output made from constants has no autograd history imperatively, so code
    after the call may write into it in place under record (a graph break after a
    timed segment did: `mask[0, [3, 3]] *= 2`); only outputs with history are
    bracketed to time their backward."""
    from gluon_dyn.hybridize.passes.backward_timing import RecordedCallTiming
    x = mx.nd.ones((2, 3))
    x.attach_grad()
    with mx.autograd.record():
        constant, computed = mx.nd.ones((1, 4)), x * 2
        timed_constant, timed_computed = RecordedCallTiming("graph").outputs_bracketed(
            [constant, computed])
        assert timed_constant is constant and timed_computed is not computed
        timed_constant[0, [3, 3]] *= 2      # MXNet refuses this on an array with history
        timed_computed.sum().backward()
    assert timed_constant.asnumpy().tolist() == [[1, 1, 1, 2]]
    assert x.grad.asnumpy().tolist() == [[2] * 3] * 2


def test_a_recheck_falling_due_while_python_serves_runs_the_call_as_written(monkeypatch):
    """The forward as written serves; taking a timed recorded call's sample at the
    next call makes a re-check due, so the check asks for the graph while the call
    was already routed to the forward as written (no graph at hand): that call runs
    as written and the measurement starts (GAN's discriminator, in training)."""
    from gluon_dyn.hybridize.passes.backward_timing import RecordedCallTiming
    monkeypatch.setattr(speed_check, "ENABLED_BY_DEFAULT", True)
    imperative, dynamic = twin_blocks(Recurrent)
    x = mx.nd.array(np.random.RandomState(0).standard_normal((8, 4)))

    def train_step():
        for block in (imperative, dynamic):
            with mx.autograd.record():
                loss = block(x).sum()
            loss.backward()
    for _ in range(3 + 1):     # profiled calls, the trace
        train_step()
    check = gluon_dyn.hybridize.call.dynamic.runner_of(dynamic).speed_check
    # as after a measurement that chose the forward as written
    check.measuring, check.choice.chosen = False, "python"
    check.samples = check._no_samples()
    sample = RecordedCallTiming("python")
    sample.forward_ms, sample.returned_ms = 1.0, 0.5
    sample.started, sample.finished = 0.0, 0.001
    check.pending = [sample]
    monkeypatch.setattr(check.choice, "recheck_due", lambda: "scheduled re-check")
    train_step()
    assert check.measuring and check.reason == "scheduled re-check"
    for (name, a), (_, b) in zip(sorted(imperative.collect_params().items()),
                                 sorted(dynamic.collect_params().items())):
        if a.grad_req != "null":
            np.testing.assert_allclose(b.grad().asnumpy(), a.grad().asnumpy(), rtol=1e-5,
                                       atol=1e-5, err_msg=name)


def test_calls_the_check_serves_as_written_run_no_converted_code_and_keep_their_schedule(
        monkeypatch):
    """Once the forward as written is chosen, a call runs it straight: outside the
    converted code's mode and room (runner._written_chosen), with its results,
    gradients and running statistics those of imperative execution, each call
    counted towards the scheduled re-check, which then measures again."""
    monkeypatch.setattr(speed_check, "ENABLED_BY_DEFAULT", True)
    imperative, dynamic = twin_blocks(Recurrent)
    x = mx.nd.array(np.random.RandomState(1).standard_normal((8, 4)))

    def train_step():
        outputs = []
        for block in (imperative, dynamic):
            block.collect_params().zero_grad()
            with mx.autograd.record():
                out = block(x)
                loss = out.sum()
            loss.backward()
            outputs.append(out.asnumpy())
        np.testing.assert_allclose(outputs[1], outputs[0], rtol=1e-5, atol=1e-6)
        for (name, a), (_, b) in zip(sorted(imperative.collect_params().items()),
                                     sorted(dynamic.collect_params().items())):
            np.testing.assert_allclose(b.data().asnumpy(), a.data().asnumpy(), rtol=1e-5,
                                       atol=1e-6, err_msg=name)
            if a.grad_req != "null":
                np.testing.assert_allclose(b.grad().asnumpy(), a.grad().asnumpy(), rtol=1e-5,
                                           atol=1e-5, err_msg=name)
    for _ in range(3 + 1):     # profiled calls, the trace
        train_step()
    runner = gluon_dyn.hybridize.call.dynamic.runner_of(dynamic)
    check = runner.speed_check
    # as after a measurement that chose the forward as written, and its warning
    check.measuring, check.choice.chosen, runner.warned_slower = False, "python", True
    entered = []
    room = runner_module.room_for_converted_code
    monkeypatch.setattr(runner_module, "room_for_converted_code",
                        lambda: (entered.append(1), room())[1])
    calls_before = check.choice.calls
    # the sixth call is timed, and its sample (once its backward ran) starts a re-check
    monkeypatch.setattr(check.choice, "wants_timing",
                        lambda: check.choice.calls == calls_before + 5)
    monkeypatch.setattr(check.choice, "recheck_due", lambda: "scheduled re-check")
    for _ in range(6):
        assert not check.measuring
        train_step()
        assert not entered and gluon_dyn.hybridize.report(dynamic)["calls"]["last"] == \
            "speed_check"
    assert check.choice.calls == calls_before + 6
    assert check.measuring and check.reason == "scheduled re-check"
    for _ in range(3):      # the re-check runs the graph: converted code
        train_step()
    assert entered
