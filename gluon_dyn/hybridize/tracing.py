"""State of a trace in progress: a converted forward running on Symbols."""
import json
import threading

import mxnet as mx

from .. import graph_json
from . import fates

_local = threading.local()


class FallbackRequired(Exception):
    """The traced code did something a graph cannot replay; run it as Python instead."""

    def __init__(self, reason, location):
        super().__init__("%s: %s" % (location, reason))
        self.reason = reason
        self.location = location


class Trace:
    """The graph inputs' shapes, and arrays from outside captured as inputs by identity."""

    def __init__(self, prefix, shapes, ndarray_code=True):
        self.prefix = prefix
        self.shapes = dict(shapes)  # input name -> shape
        self.captured = {}          # id(NDArray) -> (Symbol variable, NDArray)
        # Code written for NDArrays (Block.forward) rather than Symbols (hybrid_forward).
        self.ndarray_code = ndarray_code
        self.statements = {}        # "file:line" -> fates.Fate
        self.profile = None         # a speculation.Profile to speculate from, if any
        self.shape_reads = {}       # input name -> dimensions of its shape the code read
        self.guards = []            # guards.Guard, checked in the graph
        self.staging = 0            # >0 while the body of a graph branch or loop is traced
        self.effect_frames = []     # effects.EffectFrame of the branch or loop bodies being traced
        # (node name, output index) -> shape, for the outputs of cond and while_loop
        # nodes: MXNet 1.9.1 cannot infer them, the converter knows them.
        self.control_flow_shapes = {}
        # (function, args, kwargs) -> result, or NotImplemented: calls of converted
        # code this trace handles itself (recursion/body.py), if any.
        self.call_handler = None

    def record(self, location, fate):
        """Note what a converted statement became in this trace."""
        self.statements[location] = fate

    def capture(self, array):
        if id(array) not in self.captured:
            name = "%s_captured%d" % (self.prefix, len(self.captured))
            self.captured[id(array)] = (mx.sym.var(name), array)
            self.shapes[name] = array.shape
        return self.captured[id(array)][0]

    def note_control_flow_shape(self, symbol, shape):
        """`symbol`, an output of a cond or while_loop node, has `shape` at run time."""
        graph = json.loads(symbol.tojson())
        node, index, _ = graph["heads"][0]
        self.control_flow_shapes[(graph["nodes"][node]["name"], index)] = tuple(shape)

    def shape_of(self, symbol):
        """`symbol.shape` in traced code: the inferred shape, with the input
        dimensions it depends on noted as read (the graph is specialised to them)."""
        shape = self.inferred_shape(symbol)
        names = set(symbol.list_inputs())
        if names == {symbol.name} and symbol.get_children() is None:
            # An input's own shape: note which dimensions the code reads.
            return ReadShape(shape, lambda dims: self._note_read(symbol.name, dims))
        # A computed value's shape depends on its inputs' shapes in ways not tracked.
        for name in names:
            self._note_read(name, range(len(self.shapes.get(name, ()))))
        return shape

    def inferred_shape(self, symbol):
        inferable, known = symbol, dict(self.shapes)
        if self.control_flow_shapes:
            inferable, cut_shapes = graph_json.cut_at_outputs(symbol, self.control_flow_shapes)
            known.update(cut_shapes)
        if graph_json.holds_ops(inferable, graph_json.UNINFERABLE_OPS, nested=False):
            raise AttributeError("the shape of Symbol %r is not known while tracing (it depends "
                                 "on a graph loop or branch)" % symbol.name)
        needed = set(inferable.list_inputs())
        try:
            _, shapes, _ = inferable.infer_shape_partial(
                **{name: shape for name, shape in known.items() if name in needed})
        except mx.base.MXNetError:
            # Some shape functions reject inputs of unknown rank (`take` on a loop
            # body's placeholder) instead of leaving the output unknown.
            shapes = []
        if len(shapes) != 1 or not shapes[0] or 0 in shapes[0]:
            raise AttributeError("the shape of Symbol %r is not known while tracing" % symbol.name)
        return tuple(shapes[0])

    def _note_read(self, name, dims):
        self.shape_reads.setdefault(name, set()).update(dims)


class ReadShape(tuple):
    """An input's shape that records which of its dimensions are read: a graph that
    never read a dimension serves every size of it."""

    def __new__(cls, shape, note):
        self = super().__new__(cls, shape)
        self._note = note
        return self

    def __getitem__(self, index):
        self._note(range(len(self))[index] if isinstance(index, slice) else [index % len(self)])
        return super().__getitem__(index)

    def _everything(name):  # noqa: N805 - builds methods below
        def read_all(self, *args):
            self._note(range(len(self)))
            return getattr(tuple, name)(self, *args)
        return read_all

    for _name in ("__iter__", "__eq__", "__ne__", "__hash__", "__add__", "__radd__", "__mul__",
                  "__contains__", "__lt__", "__le__", "__gt__", "__ge__", "index", "count",
                  "__repr__", "__reduce__"):
        locals()[_name] = _everything(_name)
    del _name, _everything


def symbol_shape(symbol):
    """`Symbol.shape` (patches.py): code written for NDArrays reads `.shape`; while
    tracing, the graph is specialised to its input shapes, so a Symbol's shape is known."""
    trace = current()
    if trace is None:
        raise AttributeError("'Symbol' object has no attribute 'shape'")
    return trace.shape_of(symbol)


def symbol_ndim(symbol):
    """`Symbol.ndim` (patches.py), as symbol_shape."""
    return len(symbol_shape(symbol))


def symbol_detach(symbol):
    """`Symbol.detach()` (patches.py): state kept across calls, truncated backpropagation."""
    return mx.sym.BlockGrad(symbol)


def current():
    """The Trace in progress on this thread, or None."""
    return getattr(_local, "trace", None)


def speculate(kind, location):
    """What the trace in progress may assume at `location`: the branch to inline
    ("branch") or the trip count to unroll ("trip_count"); None to build the operator."""
    trace = current()
    # Inside the body of a graph branch or loop a guard would be a node of that
    # body, which the whole-graph check cannot reach: no speculation there.
    if trace is None or trace.profile is None or trace.staging:
        return None
    return trace.profile.branch_taken(location) if kind == "branch" else \
        trace.profile.trip_count(location)


class staging:
    """Context manager: the body of a graph branch or loop is being traced."""

    def __enter__(self):
        trace = current()
        if trace is not None:
            trace.staging += 1

    def __exit__(self, *exc):
        trace = current()
        if trace is not None:
            trace.staging -= 1


# Iterations allotted to the appends of a graph loop never profiled (guarded: a
# loop that runs longer fails its guard, and the call runs as Python, profiled).
DEFAULT_LOOP_BOUND = 64


def loop_bound(location):
    """The iterations a graph loop's per-step outputs are allotted: twice the most
    its profiled runs made (a power of two), or DEFAULT_LOOP_BOUND."""
    trace = current()
    seen = trace.profile.trip_counts.get(location) if trace.profile is not None else None
    if not seen:
        return DEFAULT_LOOP_BOUND
    return max(DEFAULT_LOOP_BOUND, 1 << (2 * max(seen) - 1).bit_length())


def add_guard(guard):
    """Check `guard` in the graph: at the top level, or routed out of the branch or
    loop body being traced (effects.EffectFrame), which adds it where it ends up."""
    trace = current()
    (trace.effect_frames[-1].guards if trace.effect_frames else trace.guards).append(guard)


def record(location, statement, became, detail):
    """Note, when a trace is in progress, what the statement at `location` became."""
    trace = current()
    if trace is not None:
        trace.record(location, fates.Fate(statement, became, detail))


class tracing:
    """Context manager marking a trace in progress."""

    def __init__(self, trace):
        self.trace = trace

    def __enter__(self):
        self.outer = current()
        _local.trace = self.trace
        return self.trace

    def __exit__(self, *exc):
        _local.trace = self.outer
