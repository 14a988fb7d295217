"""How each call of a dynamic block was served: the measure of how much of a
program really runs on graphs (the report's "calls", the fuzzer's coverage)."""
import collections
import enum


class Served(enum.Enum):
    PROFILING = "profiled: run as written while tensor predicates are recorded"
    GRAPH = "a graph"
    GUARD_FAILED = "as written: a guard failed in the graph's run"
    SPEED_CHECK = "as written: timed against the graph"
    FALLBACK = "as written: the block runs as Python"
    RAISED = "as written: the trace stopped on an error the program raises"

    @property
    def on_graph(self):
        return self is Served.GRAPH


class CallCounts:
    def __init__(self):
        self.counts = collections.Counter()
        self.last = None

    def note(self, served):
        self.counts[served] += 1
        self.last = served

    @property
    def total(self):
        return sum(self.counts.values())

    def report(self):
        """{"total", "graph", "after_profiling", "graph_share_after_profiling", "last",
        and a count per way of serving}: shares are fractions (None before any call)."""
        after = self.total - self.counts[Served.PROFILING]
        return {"total": self.total, "graph": self.counts[Served.GRAPH],
                "after_profiling": after,
                "graph_share_after_profiling": self.counts[Served.GRAPH] / after if after else None,
                "last": self.last.name.lower() if self.last else None,
                "by_kind": {served.name.lower(): self.counts[served] for served in Served}}
