"""The policy every timing-based choice follows (gluon_dyn.measure.MeasuredChoice),
with injected timings: a margin, confirmation before a switch, re-checks of a
choice that looks wrong later, and a history that says what was compared when."""
import itertools
import os
import sys
import time

import mxnet as mx
import numpy as np
import pytest

from gluon_dyn import machine_load, measure
from gluon_dyn.measure import MeasuredChoice
from tvm_bridge import segmented
from tvm_helpers import COMPILE_CACHE

PLAN, WHOLE = segmented.PLAN, segmented.WHOLE


def samples(**times_ms):
    """Timings whose times (measure.QUANTILE) are the given milliseconds, one slow
    outlier each."""
    return {name.replace("_", " "): [ms / 1000] * (measure.MIN_SAMPLES - 1) + [ms]
            for name, ms in times_ms.items()}


def choice(clock=None):
    ticks = itertools.count(1000)
    return MeasuredChoice((PLAN, WHOLE), incumbent=WHOLE, clock=clock or (lambda: next(ticks)))


def test_a_faster_variant_replaces_the_incumbent_only_once_confirmed():
    made = choice()
    assert made.decide(samples(plan=1.0, whole_graph=3.0)) == WHOLE and made.confirming
    assert made.decide(samples(plan=1.1, whole_graph=3.0)) == PLAN and not made.confirming
    assert [entry["why"] for entry in made.history] == [
        "measured: plan faster once, whole graph kept until it is confirmed",
        "measured: plan replaces whole graph"]
    first = made.history[0]
    assert (first["call"], first["time"], first["chosen"]) == (0, 1000, WHOLE)
    assert first["times_ms"] == {PLAN: pytest.approx(1.0), WHOLE: pytest.approx(3.0)}
    assert first["samples"] == {PLAN: measure.MIN_SAMPLES, WHOLE: measure.MIN_SAMPLES}


def test_one_noisy_round_never_flips_a_choice():
    made = choice()
    made.decide(samples(plan=1.0, whole_graph=3.0))
    made.decide(samples(plan=1.0, whole_graph=3.0))
    assert made.chosen == PLAN
    made.decide(samples(plan=9.0, whole_graph=3.0))   # a burst of load on the plan's turn
    assert made.chosen == PLAN and made.confirming
    made.decide(samples(plan=1.0, whole_graph=3.0))   # not confirmed: forgotten
    assert made.chosen == PLAN and not made.confirming
    made.decide(samples(plan=9.0, whole_graph=3.0))
    assert made.chosen == PLAN  # a win before the forgotten one does not count


def test_load_that_slows_most_calls_of_a_variant_does_not_hide_its_speed():
    # A busy process preempted five of the plan's eight calls: their median says
    # 6 ms, what the plan costs on its own is 0.4 ms.
    loaded_plan = [0.0004] * 3 + [0.006] * 5
    made = choice()
    for _ in range(measure.CONFIRMATIONS):
        made.decide({PLAN: loaded_plan, WHOLE: [0.0036] * 8})
    assert made.chosen == PLAN
    assert made.history[-1]["times_ms"] == {PLAN: pytest.approx(0.4), WHOLE: pytest.approx(3.6)}


def test_a_variant_faster_by_less_than_the_margin_does_not_switch():
    made = choice()
    for _ in range(3):
        made.decide(samples(plan=3.0 / (1 + measure.MARGIN / 2), whole_graph=3.0))
    assert made.chosen == WHOLE and not made.confirming


def test_a_variant_as_fast_that_returns_sooner_replaces_the_incumbent_once_confirmed():
    """Where no variant is faster by MARGIN, one as fast whose calls return to the
    caller sooner by CALLER_MARGIN wins (the caller runs on while MXNet works)."""
    made = choice()
    as_fast = samples(plan=1.0 * (1 + measure.MARGIN / 2), whole_graph=1.0)
    sooner = samples(plan=0.5, whole_graph=1.0)
    assert made.decide(as_fast, caller_samples=sooner) == WHOLE and made.confirming
    assert made.decide(as_fast, caller_samples=sooner) == PLAN
    assert [entry["why"] for entry in made.history] == [
        "measured: plan as fast and returning sooner once, whole graph kept until it is "
        "confirmed", "measured: plan replaces whole graph"]
    assert made.history[-1]["returned_ms"] == {PLAN: pytest.approx(0.5),
                                               WHOLE: pytest.approx(1.0)}
    # The winner keeps its place at the next measurement: a variant faster by less
    # than MARGIN that returns later does not take it back.
    assert made.decide(samples(plan=1.0, whole_graph=1.0 / (1 + measure.MARGIN / 2)),
                       caller_samples=sooner) == PLAN and not made.confirming


@pytest.mark.parametrize("plan_ms, plan_returned_ms", [
    (1.0 * (1 + 2 * measure.MARGIN), 0.1),                              # slower
    (1.0, 1.0 * (1 - measure.CALLER_MARGIN / 2)),                      # not sooner enough
])
def test_returning_sooner_does_not_make_up_for_being_slower_or_for_a_small_lead(
        plan_ms, plan_returned_ms):
    made = choice()
    for _ in range(3):
        made.decide(samples(plan=plan_ms, whole_graph=1.0),
                    caller_samples=samples(plan=plan_returned_ms, whole_graph=1.0))
    assert made.chosen == WHOLE and not made.confirming


def test_a_faster_variant_wins_however_late_it_returns():
    made = choice()
    for _ in range(2):
        made.decide(samples(plan=0.5, whole_graph=1.0),
                    caller_samples=samples(plan=0.5, whole_graph=0.1))
    assert made.chosen == PLAN


def test_too_few_timed_calls_decide_nothing():
    with pytest.raises(ValueError, match="needs %d timed calls" % measure.MIN_SAMPLES):
        choice().decide({PLAN: [0.001] * 3, WHOLE: [0.001] * 9})
    with pytest.raises(ValueError, match="incumbent"):
        MeasuredChoice(("a", "b"), incumbent="c")


def serve(made, calls, ms):
    """`calls` serving calls of the chosen variant, the timed ones taking `ms`."""
    for _ in range(calls):
        made.served(ms / 1000 if made.wants_timing() else None)


def timed_calls(made, calls):
    """The numbers (from 1) of the next `calls` serving calls that are timed."""
    timed = []
    for number in range(made.calls + 1, made.calls + calls + 1):
        if made.wants_timing():
            timed.append(number)
        made.served(0.001 if timed and timed[-1] == number else None)
    return timed


def test_serving_calls_are_timed_less_often_while_nothing_is_suspect(monkeypatch):
    """A timed call waits for all of MXNet's queued work: one in SAMPLE_EVERY at
    first, then twice as few after each RECENT_SAMPLES, down to one in
    MAX_SAMPLE_EVERY, and one in SAMPLE_EVERY again after the next measurement."""
    monkeypatch.setattr(measure, "FIRST_RECHECK", 10 ** 9)
    made = choice()
    made.decide(samples(plan=1.0, whole_graph=1.0))
    timed = timed_calls(made, 20000)
    gaps = [later - earlier for earlier, later in zip([0] + timed, timed)]
    every, expected = measure.SAMPLE_EVERY, []
    while len(expected) < len(gaps):
        expected += [every] * measure.RECENT_SAMPLES
        every = min(every * 2, measure.MAX_SAMPLE_EVERY)
    assert gaps == expected[:len(gaps)] and gaps[-1] == measure.MAX_SAMPLE_EVERY
    made.decide(samples(plan=1.0, whole_graph=1.0), "re-check")
    assert timed_calls(made, 3 * measure.SAMPLE_EVERY) == [
        made.calls - 3 * measure.SAMPLE_EVERY + k * measure.SAMPLE_EVERY for k in (1, 2, 3)]


def test_a_timed_call_awaiting_its_time_does_not_make_the_next_call_timed():
    """A recorded call's time comes once its backward ran, after later calls."""
    made = choice()
    made.decide(samples(plan=1.0, whole_graph=1.0))
    for _ in range(measure.SAMPLE_EVERY - 1):
        assert not made.wants_timing()
        made.served()
    assert made.wants_timing()          # timed; its time not served yet
    assert not made.wants_timing()      # the next call
    made.served()
    made.served(0.001)                  # the timed call's time, once its backward ran
    assert not made.wants_timing()


class _Noting(mx.operator.CustomOp):
    """Identity that, on MXNet's custom-operator thread, sleeps and then notes that
    it ran: work still queued when the caller goes on."""
    log = []

    def forward(self, is_train, req, in_data, out_data, aux):
        time.sleep(0.2)
        self.assign(out_data[0], req[0], in_data[0])
        _Noting.log.append("queued work done")


@mx.operator.register("gluon_dyn_test_noting")
class _NotingProp(mx.operator.CustomOpProp):
    def create_operator(self, ctx, shapes, dtypes):
        return _Noting()


@pytest.mark.parametrize("timed_by", ["timed_ms", "serve"])
def test_a_timed_call_is_timed_from_when_the_work_queued_before_it_has_run(monkeypatch, timed_by):
    """A program running ahead of its operators leaves work queued before a timed
    call: the clock starts once it has run, so the call's time is its own."""
    log = _Noting.log
    log.clear()
    clock = time.perf_counter
    monkeypatch.setattr(measure.time, "perf_counter", lambda: log.append("clock") or clock())
    queued = mx.nd.Custom(mx.nd.ones((2,)), op_type="gluon_dyn_test_noting")

    def call():
        log.append("call")
        return mx.nd.ones((2,)) * 2

    if timed_by == "timed_ms":
        measure.timed_ms(call)
    else:
        made = choice()
        made.decide(samples(plan=1.0, whole_graph=1.0))
        for _ in range(measure.SAMPLE_EVERY - 1):
            made.served()
        assert made.timing_due()
        made.serve(call, lambda outputs: outputs.wait_to_read(), lambda why: None)
    assert log == ["queued work done", "clock", "call", "clock", "clock"]
    assert queued.asnumpy().tolist() == [1, 1]


def test_a_choice_much_slower_than_its_alternative_was_is_measured_again(monkeypatch):
    monkeypatch.setattr(measure, "FIRST_RECHECK", 10 ** 9)  # no scheduled re-check here
    made = choice()
    made.decide(samples(plan=6.0, whole_graph=3.6))   # the plan measured under load
    assert made.chosen == WHOLE
    serve(made, measure.SAMPLE_EVERY * measure.RECENT_SAMPLES - 1, ms=0.5)
    assert made.recheck_due() is None  # whole graph serving at 0.5 ms: not suspect
    made = choice()
    made.decide(samples(plan=0.39, whole_graph=3.6))
    made.decide(samples(plan=0.39, whole_graph=3.6))
    assert made.chosen == PLAN
    serve(made, measure.SAMPLE_EVERY * measure.RECENT_SAMPLES - 1, ms=5.96)
    assert made.recheck_due() is None  # four timed calls are not enough evidence
    serve(made, 1, ms=5.96)
    assert made.recheck_due() == ("plan ran 5.960 ms per call, 1.7x the 3.600 ms another "
                                  "variant took")
    made.decide(samples(plan=0.4, whole_graph=3.6), "re-check")
    assert made.chosen == PLAN  # the plan measured fast again: kept
    # A suspicion not borne out doubles the ratio it takes to suspect again.
    serve(made, measure.SAMPLE_EVERY * measure.RECENT_SAMPLES, ms=3.6 * 2)
    assert made.recheck_due() is None


def test_a_choice_made_under_load_is_measured_again_once_the_load_goes(monkeypatch):
    monkeypatch.setattr(measure, "FIRST_RECHECK", 10 ** 9)  # no scheduled re-check here
    made = choice()
    made.decide(samples(plan=6.0, whole_graph=4.0))   # both measured with a core taken
    assert made.chosen == WHOLE
    serve(made, measure.SAMPLE_EVERY * measure.RECENT_SAMPLES, ms=3.0)
    assert made.recheck_due() is None  # within the suspect ratio of what it measured
    serve(made, measure.SAMPLE_EVERY * measure.RECENT_SAMPLES, ms=1.5)
    assert made.recheck_due() == ("whole graph ran 1.500 ms per call, 2.7x faster than the "
                                  "4.000 ms it measured: the load changed")
    made.decide(samples(plan=0.4, whole_graph=1.5), "re-check")
    made.decide(samples(plan=0.4, whole_graph=1.5), "re-check")
    assert made.chosen == PLAN


def test_a_choice_whose_alternative_is_never_seen_is_measured_again_when_the_load_changes(
        monkeypatch):
    """The noisy-neighbour case: one MXNet graph chosen while another process held a
    core serves as fast with it gone, so nothing it does looks wrong; the plan it
    never runs is the one that gained. The machine's load says so."""
    monkeypatch.setattr(measure, "FIRST_RECHECK", 10 ** 9)  # no scheduled re-check here
    load = [1.0]
    monkeypatch.setattr(machine_load, "other_cpus", lambda: load[0])
    made = choice()
    made.decide(samples(plan=1.41, whole_graph=1.39))   # the neighbour busy
    serve(made, measure.LOAD_RECHECK_CALLS, ms=1.39)
    load[0] = 0.8                                       # a change under LOAD_CHANGE
    assert made.recheck_due() is None
    load[0] = 0.0                                       # the neighbour gone
    serve(made, 1, ms=1.39)
    assert made.recheck_due() == ("other processes kept 1.0 CPUs busy when it was measured, "
                                  "0.0 now: the load changed")
    made.decide(samples(plan=0.16, whole_graph=1.6), "re-check")
    made.decide(samples(plan=0.16, whole_graph=1.6), "re-check")
    assert made.chosen == PLAN
    # Measured at the new load: no further re-check until it changes again, and
    # not within LOAD_RECHECK_CALLS calls of a measurement.
    serve(made, measure.LOAD_RECHECK_CALLS - 1, ms=0.16)
    assert made.recheck_due() is None
    load[0] = 1.0
    assert made.recheck_due() is None
    serve(made, 1, ms=0.16)
    assert made.recheck_due().endswith("the load changed")


def test_the_load_of_other_processes_is_the_machines_busy_time_less_this_processs(
        monkeypatch):
    readings = iter([(10.0, 100.0, 5.0),     # first: wall, busy CPU s, own CPU s
                     (12.0, 104.0, 6.0)])    # 2 s on: 4 CPU s busy, 1 of them ours
    wall = iter([10.1, 12.0])                # 0.1 s after the first: too soon to read
    monkeypatch.setattr(machine_load._Sampler, "_reading", staticmethod(lambda: next(readings)))
    monkeypatch.setattr(machine_load.time, "monotonic", lambda: next(wall))
    sampler = machine_load._Sampler()
    assert sampler.other_cpus() is None      # no interval yet
    assert sampler.other_cpus() == pytest.approx(1.5)
    if sys.platform.startswith("linux"):   # the real counters: this process's CPU time is
        # part of the machine's busy time, which is within the CPUs' time since boot
        with open("/proc/uptime") as uptime:
            since_boot = float(uptime.read().split()[0])
        busy = machine_load._busy_seconds()
        assert time.process_time() - 0.1 <= busy <= since_boot * os.cpu_count() + 1


def test_choices_are_measured_again_at_scheduled_calls():
    made = choice()
    made.decide(samples(plan=1.0, whole_graph=1.0))
    due = []
    for call in range(1, measure.FIRST_RECHECK * measure.RECHECK_GROWTH + 1):
        made.served()
        if made.recheck_due():
            due.append(call)
    assert due == [measure.FIRST_RECHECK, measure.FIRST_RECHECK * measure.RECHECK_GROWTH]


def test_a_plan_chosen_under_load_is_replaced_at_its_re_check(monkeypatch):
    """SegmentedGraph with scripted timings: the issue's case, where the plan
    measured slower while another process held a core and one MXNet graph was
    chosen; the scheduled re-check measures the plan 9x faster, twice, and
    switches. The report lists the three measurements."""
    script = iter([samples(tvm=6.0, mxnet=3.6), samples(plan=6.0, whole_graph=3.6),
                   samples(tvm=0.4, mxnet=3.6), samples(tvm=0.4, mxnet=3.6),
                   samples(plan=0.4, whole_graph=3.6), samples(plan=0.4, whole_graph=3.6)])
    monkeypatch.setattr(segmented, "interleaved_samples", lambda variants, repeats: next(script))
    # Serving calls run at this machine's speed, not the script's: no suspicion here.
    monkeypatch.setattr(measure, "SUSPECT_RATIO", float("inf"))
    x, w = mx.sym.var("x"), mx.sym.var("w")
    symbol = mx.sym.relu(mx.sym.FullyConnected(x, w, no_bias=True, num_hidden=8))
    arrays = [mx.nd.ones((2, 4)), mx.nd.ones((8, 4))]
    plan = segmented.SegmentedGraph(symbol, ["x", "w"], arrays, cache_dir=COMPILE_CACHE.name)
    assert plan.uses_whole_graph and plan.steps[0].backend == "mxnet"
    # Re-checks happen at timed calls: the first one at or after FIRST_RECHECK.
    due = -(-measure.FIRST_RECHECK // measure.SAMPLE_EVERY) * measure.SAMPLE_EVERY
    for _ in range(due):
        np.testing.assert_allclose(plan(*arrays)[0].asnumpy(), np.full((2, 8), 4.0))
    report = plan.report()
    assert report["runs"] == "segments" and report["segments"][0]["backend"] == "tvm"
    history = report["choice"]["history"]
    assert [(entry["call"], entry["chosen"]) for entry in history] == [
        (0, WHOLE), (due, WHOLE), (due, PLAN)]
    assert history[1]["why"] == ("scheduled re-check after %d calls: plan faster once, whole "
                                 "graph kept until it is confirmed" % due)
    assert report["segments"][0]["choice"]["chosen"] == "tvm"
