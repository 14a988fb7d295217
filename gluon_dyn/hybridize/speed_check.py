"""Keep graphs only where they are faster than the Python they replace.

A graph is not always faster: MXNet's `_cond` and `_while_loop` cost more per
call than a handful of imperative ops, so a small forward whose branch or loop
cannot be speculated away (a guard storm) may run slower as a graph. Once a
graph has served a call, the next calls alternate between the graph and the
forward as written, each timed to completion; if the graph's median is not the
faster, the block runs as Python from then on (the report says so, with both
times).
"""
import statistics

from ..measure import timed_ms

SAMPLES = 5  # timed calls of each kind
GRAPH, PYTHON = "graph", "python"
# hybridize(dynamic=True, check_speed=None) means this; tests of the graph
# machinery turn it off so that tiny programs keep their graphs.
ENABLED_BY_DEFAULT = True


class SpeedCheck:
    def __init__(self, enabled=None):
        self.times = {GRAPH: [], PYTHON: []}
        self.done = not (ENABLED_BY_DEFAULT if enabled is None else enabled)

    def next_variant(self):
        """GRAPH or PYTHON for a call to be timed, None once the check is over."""
        if self.done:
            return None
        return GRAPH if len(self.times[GRAPH]) <= len(self.times[PYTHON]) else PYTHON

    def timed(self, variant, run):
        """run(), timed until MXNet has finished all its work."""
        result, ms = timed_ms(run)
        self.times[variant].append(ms)
        self.done = len(self.times[PYTHON]) >= SAMPLES
        return result

    def graph_is_slower(self):
        if not self.done or not self.times[PYTHON]:
            return False
        medians = self.medians()
        return medians[GRAPH] > medians[PYTHON]

    def medians(self):
        return {variant: statistics.median(times) for variant, times in self.times.items() if times}

    def report(self):
        """The check's state and the median milliseconds behind it."""
        medians = self.medians()
        if not self.times[PYTHON] and self.done:
            state = "off"
        elif not self.done:
            state = "in progress (%d of %d calls of each kind timed)" % (
                len(self.times[PYTHON]), SAMPLES)
        else:
            state = "graph dropped (slower)" if self.graph_is_slower() else "graph kept (faster)"
        return {"state": state, "graph_ms": medians.get(GRAPH), "python_ms": medians.get(PYTHON)}
