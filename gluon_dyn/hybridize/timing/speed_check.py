"""Keep graphs only where they are faster than the Python they replace.

A graph is not always faster: MXNet's `_cond` and `_while_loop` cost more per
call than a handful of imperative ops, so a small forward whose branch or loop
cannot be speculated away (a guard storm) may run slower as a graph. Once a
graph has served a call, calls alternate between the graph and the forward as
written, each timed to completion, until measure.MeasuredChoice decides: the
forward as written is the incumbent, and the graph takes over only when it is
faster by a margin in consecutive measurements (or as fast, and returning to the
caller much sooner: measure.CALLER_MARGIN); serving calls are sampled, and a
choice that looks wrong later (or a scheduled re-check) measures both again.
The recursion engine chooses the same way between two ways of running a call
(recursion/engine.py), naming its own variants. A call recorded for training is
timed with its share of the backward (backward_timing.py): its sample is taken
once that backward has run, so that a decision it completes serves the next call.
Recorded calls and inference calls are measured apart, each kind alternating on
its own and compared with itself: a GAN's generator runs once for inference and
once recorded per step, and alternating over all its calls gave the graph every
recorded call (0.95 ms with its backward) and the forward as written every
inference call (0.47 ms), which chose the forward as written for a graph that
made the step 10% faster.
"""
import weakref

from mxnet import autograd

from ...measure import MIN_SAMPLES, MeasuredChoice, timed_call
from ..passes.backward_timing import RecordedCallTiming

GRAPH, PYTHON = "graph", "python"
# hybridize(dynamic=True, check_speed=None) means this; tests of the graph
# machinery turn it off so that tiny programs keep their graphs.
ENABLED_BY_DEFAULT = True
# A recorded call whose backward has not started after this many later calls
# (recorded without a backward: an evaluation under record) counts its forward.
BACKWARD_WAIT_CALLS = 2
RECORDED, INFERENCE = "recorded", "inference"    # the kinds of calls measured apart


def call_kind():
    """The kind of the call being made: recorded for autograd, or not."""
    return RECORDED if autograd.is_recording() else INFERENCE


class SpeedCheck:
    """Chooses between a `challenger` (the graph) and an `incumbent` (the
    forward as written), kept until the challenger measures faster; `labels`
    name them in the report."""

    def __init__(self, enabled=None, challenger=GRAPH, incumbent=PYTHON,
                 labels=("graph", "forward as written")):
        enabled = ENABLED_BY_DEFAULT if enabled is None else enabled
        self.challenger, self.incumbent = challenger, incumbent
        self.labels = dict(zip((challenger, incumbent), labels))
        self.choice = MeasuredChoice((challenger, incumbent), incumbent=incumbent) \
            if enabled else None
        self.measuring = enabled
        self.reason = "first measurement"
        self.samples = self._no_samples()   # kind of call -> variant -> seconds
        self.returned = self._no_samples()  # ... -> seconds until the call returned
        self.pending = []            # RecordedCallTimings waiting for their backward

    def _no_samples(self):
        return {kind: {self.challenger: [], self.incumbent: []} for kind in (RECORDED, INFERENCE)}

    def serves_python(self):
        """Whether calls run as the incumbent (the forward as written) now: it
        measured faster and no measurement is due."""
        return self.choice is not None and not self.measuring and \
            self.choice.chosen == self.incumbent

    def next_variant(self):
        """(challenger or incumbent, whether to time the call), or None (no
        choice made): the challenger, untimed."""
        if self.choice is None:
            return None
        self._take_recorded_samples()
        if self.measuring:
            kind = call_kind()
            return (self.challenger if self._sampled(self.challenger, kind) <=
                    self._sampled(self.incumbent, kind) else self.incumbent, True)
        return self.choice.chosen, self.choice.wants_timing()

    def untimed_graph_call(self):
        """If the next call runs on the graph untimed with nothing else for the check
        to do (no measurement, no recorded call awaiting its backward): counts it as
        next_variant and record would, and returns True; else False, and the call
        goes through next_variant."""
        choice = self.choice
        if choice is None:
            return True
        if self.measuring or self.pending or choice.chosen != self.challenger or \
                choice.timing_due():
            return False
        self.record(self.challenger, None)
        return True

    def timed(self, variant, run):
        """run(), timed until MXNet has finished its work; the timing is recorded,
        for a recorded call once its backward has run too."""
        if not autograd.is_recording():
            result, ms, returned_ms = timed_call(run)
            self.record(variant, ms / 1000, INFERENCE, returned_ms / 1000)
            return result
        timing = RecordedCallTiming(variant, weakref.WeakMethod(self._backward_finished))
        result, timing.forward_ms, timing.returned_ms = timed_call(run)
        self.pending.append(timing)
        return timing.outputs_bracketed(result)

    def _take_recorded_samples(self):
        """Records the pending recorded calls whose backward has finished, and, as
        forward only, those that waited too long."""
        if not self.pending:
            return
        waiting = []
        for timing in self.pending:
            if timing.finished is not None or timing.calls_waited >= BACKWARD_WAIT_CALLS:
                self._record_timing(timing)
            else:
                timing.calls_waited += 1
                waiting.append(timing)
        self.pending = waiting

    def _backward_finished(self):
        """Records the pending recorded calls whose backward has finished."""
        finished = [timing for timing in self.pending if timing.finished is not None]
        self.pending = [timing for timing in self.pending if timing.finished is None]
        for timing in finished:
            self._record_timing(timing)

    def _record_timing(self, timing):
        self.record(timing.variant, timing.total_ms() / 1000, RECORDED,
                    timing.returned_ms / 1000)

    def _sampled(self, variant, kind):
        """Timed calls of `variant` of this kind in this measurement, recorded ones
        awaiting their backward too."""
        pending = sum(timing.variant == variant for timing in self.pending) \
            if kind == RECORDED else 0
        return len(self.samples[kind][variant]) + pending

    def record(self, variant, seconds, kind=None, returned_seconds=None):
        """A call of `variant` took `seconds` (None: not timed), and returned after
        `returned_seconds` (None: not measured; of a recorded call, its forward);
        `kind`: RECORDED or INFERENCE, by default the current call's. A measurement
        is decided on the first kind of calls with enough samples of both variants."""
        if self.measuring:
            kind = kind or call_kind()
            samples, returned = self.samples[kind], self.returned[kind]
            samples[variant].append(seconds)
            if returned_seconds is not None:
                returned[variant].append(returned_seconds)
            if min(len(times) for times in samples.values()) >= MIN_SAMPLES:
                complete = all(len(returned[name]) == len(times)
                               for name, times in samples.items())
                self.choice.decide(samples, self.reason, returned if complete else None)
                self.samples, self.returned = self._no_samples(), self._no_samples()
                self.measuring = self.choice.confirming
                self.reason = "confirming"
            return
        if variant != self.choice.chosen:     # measured before the choice, sampled since
            return
        self.choice.served(seconds)
        if seconds is None:     # re-checks are decided at timed calls (reading the load costs)
            return
        due = self.choice.recheck_due()
        if due:
            self.measuring, self.reason = True, due

    def report(self):
        """The choice, what was compared and when (measure.MeasuredChoice.report)."""
        if self.choice is None:
            return {"state": "off"}
        report = self.choice.report()
        report["state"] = "measuring (%s)" % self.reason if self.measuring else \
            "%s chosen" % self.labels[self.choice.chosen]
        return report
