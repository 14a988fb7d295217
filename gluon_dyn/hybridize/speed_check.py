"""Keep graphs only where they are faster than the Python they replace.

A graph is not always faster: MXNet's `_cond` and `_while_loop` cost more per
call than a handful of imperative ops, so a small forward whose branch or loop
cannot be speculated away (a guard storm) may run slower as a graph. Once a
graph has served a call, calls alternate between the graph and the forward as
written, each timed to completion, until measure.MeasuredChoice decides: the
forward as written is the incumbent, and the graph takes over only when it is
faster by a margin in consecutive measurements; serving calls are sampled, and a
choice that looks wrong later (or a scheduled re-check) measures both again.
"""
from ..measure import MIN_SAMPLES, MeasuredChoice, timed_ms

GRAPH, PYTHON = "graph", "python"
# hybridize(dynamic=True, check_speed=None) means this; tests of the graph
# machinery turn it off so that tiny programs keep their graphs.
ENABLED_BY_DEFAULT = True


class SpeedCheck:
    def __init__(self, enabled=None):
        enabled = ENABLED_BY_DEFAULT if enabled is None else enabled
        self.choice = MeasuredChoice((GRAPH, PYTHON), incumbent=PYTHON) if enabled else None
        self.measuring = enabled
        self.reason = "first measurement"
        self.samples = {GRAPH: [], PYTHON: []}

    def serves_python(self):
        """Whether calls run as written now (measured faster, no measurement due)."""
        return self.choice is not None and not self.measuring and self.choice.chosen == PYTHON

    def next_variant(self):
        """(GRAPH or PYTHON, whether to time the call), or None: the graph, untimed."""
        if self.choice is None:
            return None
        if self.measuring:
            return (GRAPH if len(self.samples[GRAPH]) <= len(self.samples[PYTHON]) else PYTHON,
                    True)
        return self.choice.chosen, self.choice.wants_timing()

    def timed(self, variant, run):
        """run(), timed until MXNet has finished its work; the timing is recorded."""
        result, ms = timed_ms(run)
        self.record(variant, ms / 1000)
        return result

    def record(self, variant, seconds):
        if self.measuring:
            self.samples[variant].append(seconds)
            if min(len(times) for times in self.samples.values()) >= MIN_SAMPLES:
                self.choice.decide(self.samples, self.reason)
                self.samples = {GRAPH: [], PYTHON: []}
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
            "%s chosen" % ("graph" if self.choice.chosen == GRAPH else "forward as written")
        return report
