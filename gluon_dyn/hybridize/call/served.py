"""How each call of a dynamic block was served: the measure of how much of a
program really runs on graphs (the report's "calls", the fuzzer's coverage)."""
import collections
import enum


class Served(enum.Enum):
    PROFILING = "profiled: run as written while tensor predicates are recorded"
    GRAPH = "a graph"
    RECURSION = "the recursion engine: compiled bodies, nodes batched"
    BATCHED = ("with the other recorded calls of its step, as one call (batch_calls=True): on the "
               "recursion engine, or as one graph")
    GUARD_FAILED = "as written: a guard failed in the graph's run"
    SPEED_CHECK = "as written: timed against the graph, or measured faster than it"
    FALLBACK = "as written: the block runs as Python"
    RAISED = "as written: the trace stopped on an error the program raises"
    SEGMENTS = "graph segments around statements that run as Python (graph breaks)"
    SEGMENTS_IN_PYTHON = "graph segments around graph breaks, some of which ran as Python"
    BREAKS_ONLY = "as written: the forward returned in a graph break before any graph segment ran"
    CHILD_GRAPHS = "as written, its child blocks on graphs of their own (graph breaks at the children)"

    @property
    def on_graph(self):
        return self in (Served.GRAPH, Served.SEGMENTS, Served.RECURSION, Served.BATCHED,
                        Served.CHILD_GRAPHS)


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

    @property
    def on_graph(self):
        return sum(count for served, count in self.counts.items() if served.on_graph)

    def report(self):
        """{"total", "graph" (calls on graphs: traced graphs, graph segments around
        graph breaks, the recursion engine), "after_profiling",
        "graph_share_after_profiling", "last", and a count per way of serving}: shares
        are fractions (None before any call)."""
        after = self.total - self.counts[Served.PROFILING]
        on_graphs = self.on_graph
        return {"total": self.total, "graph": on_graphs,
                "after_profiling": after,
                "graph_share_after_profiling": on_graphs / after if after else None,
                "last": self.last.name.lower() if self.last else None,
                "by_kind": {served.name.lower(): self.counts[served] for served in Served}}
