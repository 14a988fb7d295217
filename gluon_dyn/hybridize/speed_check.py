"""Keep graphs only where they are faster than the Python they replace.

A graph is not always faster: MXNet's `_cond` and `_while_loop` cost more per
call than a handful of imperative ops, so a small forward whose branch or loop
cannot be speculated away (a guard storm) may run slower as a graph. Once a
graph has served a call, calls alternate between the graph and the forward as
written, each timed to completion, until measure.MeasuredChoice decides: the
forward as written is the incumbent, and the graph takes over only when it is
faster by a margin in consecutive measurements; serving calls are sampled, and a
choice that looks wrong later (or a scheduled re-check) measures both again.
The recursion engine chooses the same way between two ways of running a call
(recursion/engine.py), naming its own variants.

A call recorded for training costs mostly after it returns: its backward, where
one graph's backward is one CachedOp call and the forward as written's is
an operator (or a child block's graph) per step. So a recorded call is timed
from its start to the start of the next call of the block: its backward, the
optimizer step and the caller's own work in between, which are the same for
both variants, included. While measuring, each pair of calls runs both variants
in an order drawn at random: a caller whose steps alternate (two models trained
in turn, a benchmark's rounds) would otherwise give one variant every long gap.
"""
import random
import time

import mxnet as mx
from mxnet import autograd

from ..measure import MIN_SAMPLES, MeasuredChoice, timed_ms

GRAPH, PYTHON = "graph", "python"
# hybridize(dynamic=True, check_speed=None) means this; tests of the graph
# machinery turn it off so that tiny programs keep their graphs.
ENABLED_BY_DEFAULT = True


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
        self.samples = {challenger: [], incumbent: []}
        self._recorded_call = None   # (variant, start) of a timed recorded call not closed yet
        self._order = random.Random(0)

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
        if self._recorded_call is not None:
            # The previous call was recorded and timed: its time ends here.
            variant, start = self._recorded_call
            self._recorded_call = None
            mx.nd.waitall()
            self.record(variant, time.perf_counter() - start)
        if self.measuring:
            counts = {name: len(times) for name, times in self.samples.items()}
            if counts[self.challenger] == counts[self.incumbent]:
                return self._order.choice((self.challenger, self.incumbent)), True
            return min(counts, key=counts.get), True
        return self.choice.chosen, self.choice.wants_timing()

    def timed(self, variant, run):
        """run(), timed until MXNet has finished its work, or, recorded, until the
        next call starts; the timing is recorded."""
        if autograd.is_recording():
            mx.nd.waitall()
            self._recorded_call = (variant, time.perf_counter())
            return run()
        result, ms = timed_ms(run)
        self.record(variant, ms / 1000)
        return result

    def record(self, variant, seconds):
        if self.measuring:
            self.samples[variant].append(seconds)
            if min(len(times) for times in self.samples.values()) >= MIN_SAMPLES:
                self.choice.decide(self.samples, self.reason)
                self.samples = {self.challenger: [], self.incumbent: []}
                self.measuring = self.choice.confirming
                self.reason = "confirming"
            return
        self.choice.served(seconds)
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
