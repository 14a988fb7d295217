"""A graph run as segments: TVM where it compiles and measures faster, MXNet elsewhere.

The graph is partitioned (partition.py); each TVM segment is compiled (weights
stay inputs, so one compiled plan serves updated parameters; what depends on
parameters only is prepared when they change, see runtime.CompiledFunction) and
timed on the
example inputs against the same segment as an MXNet CachedOp; the faster one
runs it. MXNet segments (ops with no converter, gluon_dyn's guards) run as
CachedOps. Finally the whole plan is timed against one CachedOp of the whole
graph, and the faster of the two serves calls. Every one of these choices is a
gluon_dyn.measure.MeasuredChoice: MXNet stays unless TVM is faster by a margin
in two measurements, and the choices are measured again when the plan serving
calls runs much slower than the alternative did, and at scheduled re-checks;
the report gives each measurement (when, what, the times, the outcome).
Inference only: training keeps MXNet, whose backward TVM does not provide.

A graph holding _cond/_while_loop (which run in MXNet) is partitioned on types
found by running it on the example inputs (observed_types.py): a TVM segment
reading such a value checks it at each call, and a call where one differs runs
as one MXNet graph (counted in the report), never on code compiled for other
shapes.
"""
import time

import mxnet as mx
import numpy as np
from gluon_dyn.graph_json import UNINFERABLE_OPS
from gluon_dyn.measure import MeasuredChoice, interleaved_samples

from .compiler import compile_module
from .graph import load_graph
from .observed_types import TypesChanged, checking_inputs
from .partition import TVM, partition
from .relax_builder import build_segment
from .tuning import tune_module

REPEATS = 15  # timed calls per variant when choosing
PLAN, WHOLE = "plan", "whole graph"  # what serves calls


class Step:
    """One segment of the plan: `run(*arrays) -> list of arrays`, with the plan
    slots it reads and writes.

    `symbol` is the segment as an MXNet graph (its inputs, in `symbol.list_inputs()`
    order, are what `run_in_mxnet` takes); `function` is its CompiledFunction when
    it compiled, taking the values `input_order` and returning `output_order`.
    """

    def __init__(self, segment, symbol, run, reads, writes):
        self.segment, self.symbol, self.run, self.reads, self.writes = (
            segment, symbol, run, reads, writes)
        self.run_in_mxnet = run
        self.backend = "mxnet"
        self.function = self.input_order = self.output_order = None
        self.choice = None  # a MeasuredChoice between "tvm" and "mxnet", once timed
        self.times_ms = {}
        self.compile_s = self.tune_s = None
        self.note = ""


class SegmentedGraph:
    """Runs `symbol` on arrays given in `input_names` order (every graph input,
    parameters and auxiliary states included); returns its outputs in
    `symbol.list_outputs()` order.

    `example_inputs` give the shapes and dtypes (and the data the choices are
    timed on); `symbolic_dims` ({"data": {0: "batch"}}) leaves dimensions open so
    one plan serves several sizes. `tune` (a number of meta-schedule trials)
    tunes each TVM segment first; the tuning database is kept in the cache.
    `parameter_names` are the inputs that change rarely (weights: work on them
    alone is prepared once per change); by default the inputs no operator takes
    as its first argument (Graph.weight_like_inputs). Any input may change at any
    call either way: the choice only decides what is prepared ahead.

    After construction: `steps` (a Step per segment, in order), `choice` (the
    MeasuredChoice between PLAN and WHOLE, one MXNet CachedOp of the graph; None
    without measurement), `uses_whole_graph` (the latter serves calls; setting it
    forces the choice), `check_inputs` (set False when the caller guarantees
    shapes and dtypes; or see check_only).
    """

    def __init__(self, symbol, input_names, example_inputs, symbolic_dims=None, cache_dir=None,
                 choose_by_measurement=True, tune=None, parameter_names=None):
        if len(input_names) != len(example_inputs):
            raise ValueError("%d input names but %d example inputs"
                             % (len(input_names), len(example_inputs)))
        missing = set(symbol.list_inputs()) - set(input_names)
        if missing:
            raise ValueError("no example input for graph input(s) %s" % sorted(missing))
        self.graph = graph = load_graph(symbol)
        shapes = {name: array.shape for name, array in zip(input_names, example_inputs)}
        dtypes = {name: np.dtype(array.dtype).name
                  for name, array in zip(input_names, example_inputs)}
        # Values live in slots: the inputs first, then each segment's outputs.
        self._slots = {(graph.variable_index[name], 0): k for k, name in enumerate(input_names)
                       if name in graph.variable_index}
        self._num_inputs = self._num_slots = len(input_names)
        # Per input: its shape (None where symbolic) and dtype, checked per call
        # unless the caller guarantees them (check_inputs = False, check_only).
        self._input_names = list(input_names)
        self._input_types = [(tuple(None if axis in (symbolic_dims or {}).get(name, {}) else dim
                                    for axis, dim in enumerate(array.shape)), array.dtype)
                             for name, array in zip(input_names, example_inputs)]
        self._checked = list(range(len(input_names)))
        self.check_inputs = True
        # static_shape lets MXNet plan memory once; MXNet re-plans on a new shape,
        # which symbolic dims would make happen on every change of size. MXNet
        # 1.9.1 knows the output shapes of _cond/_while_loop only once they ran.
        self.static_shape = not symbolic_dims and not graph.holds_ops(UNINFERABLE_OPS)
        self.symbol = symbol
        self.parameter_names = set(graph.weight_like_inputs() if parameter_names is None
                                   else parameter_names)
        segments = partition(graph, shapes, dtypes, symbolic_dims,
                             example_inputs=dict(zip(input_names, example_inputs)))
        self.steps = [self._step(segment, shapes, dtypes, symbolic_dims, cache_dir, tune)
                      for segment in segments]
        self._heads = [self._slots[ref] for ref in graph.heads]
        self._whole = _cached_op(symbol, self.static_shape)
        self._whole_order = [input_names.index(name) for name in symbol.list_inputs()]
        self.plan_ms = self.whole_ms = None
        self.choice = MeasuredChoice((PLAN, WHOLE), incumbent=WHOLE) if \
            choose_by_measurement else None
        self._forced = None if choose_by_measurement else PLAN
        # Calls run as one MXNet graph since a value typed by running differed.
        self.types_changed_calls, self._types_changed_last = 0, []
        if choose_by_measurement:
            self._choose(list(example_inputs), "built")

    @property
    def uses_whole_graph(self):
        """Whether one MXNet CachedOp of the whole graph serves calls."""
        return (self._forced or self.choice.chosen) == WHOLE

    @uses_whole_graph.setter
    def uses_whole_graph(self, value):
        self._forced = WHOLE if value else PLAN

    def _step(self, segment, shapes, dtypes, symbolic_dims, cache_dir, tune):
        reads = [self._slots[ref] for ref in segment.inputs]
        symbol = segment.to_symbol(self.graph)
        by_name = dict(zip(segment.input_names(self.graph), range(len(reads))))
        order = [by_name[name] for name in symbol.list_inputs()]
        cached = _cached_op(symbol, self.static_shape)

        def run_in_mxnet(*arrays):
            return _as_list(cached(*[arrays[k] for k in order]))

        writes = []
        for ref in segment.outputs:
            self._slots[ref] = self._num_slots
            writes.append(self._num_slots)
            self._num_slots += 1
        step = Step(segment, symbol, run_in_mxnet, reads, writes)
        if segment.kind == TVM:
            self._compile(step, shapes, dtypes, symbolic_dims, cache_dir, tune)
        return step

    def _compile(self, step, shapes, dtypes, symbolic_dims, cache_dir, tune):
        """Make `step` run its segment on TVM; if that fails, it stays in MXNet, noted."""
        try:
            module, input_order, output_order = build_segment(
                self.graph, step.segment, shapes, dtypes, symbolic_dims, self.parameter_names)
            if tune:
                step.tune_s = tune_module(module, trials=tune, cache_dir=cache_dir)["seconds"]
            start = time.perf_counter()
            function = compile_module(module, cache_dir=cache_dir)
            step.compile_s = 0.0 if function.info.get("from_cache") else \
                time.perf_counter() - start
        except Exception as error:  # noqa: BLE001 - MXNet runs what TVM cannot compile
            step.note = "TVM compile failed, runs in MXNet: %s: %s" % (type(error).__name__, error)
            return
        position = {ref: k for k, ref in enumerate(step.segment.inputs)}
        take = [position[ref] for ref in input_order]
        produced = {ref: k for k, ref in enumerate(output_order)}
        give = [produced[ref] for ref in step.segment.outputs]

        call = function.call_unchecked  # the plan's inputs are checked once, in __call__

        def run_in_tvm(*arrays):
            results = _as_list(call(*[arrays[k] for k in take]))
            return [results[k] for k in give]

        segment = step.segment
        if segment.observed_inputs:
            names = segment.input_names(self.graph)
            run_in_tvm = checking_inputs(run_in_tvm, {k: segment.input_types[k] for k in
                                                      segment.observed_inputs}, names)
            step.note = ("reads %s, typed by running the graph on the example inputs (MXNet "
                         "cannot infer through %s): on TVM, checked at each call; a call "
                         "where they differ runs as one MXNet graph" % (
                             ", ".join(names[k] for k in segment.observed_inputs),
                             "/".join(UNINFERABLE_OPS)))
        step.run_in_tvm, step.function = run_in_tvm, function
        step.input_order, step.output_order = input_order, output_order
        step.run, step.backend = run_in_tvm, "tvm"

    def _choose(self, inputs, why):
        """Time each TVM segment against MXNet on `inputs`; then the whole plan
        against one CachedOp of the graph (MeasuredChoice decides each)."""
        values = self._slot_list(inputs)
        for step in self.steps:
            args = [values[k] for k in step.reads]
            if step.function is not None and step.choice is not False:
                self._choose_backend(step, args, why)
            _store(values, step.writes, step.run(*args))
        times = _decide(self.choice, {PLAN: lambda: _wait(self._run_plan(inputs)),
                                        WHOLE: lambda: _wait(self._run_whole(inputs))}, why)
        self.plan_ms, self.whole_ms = times[PLAN], times[WHOLE]

    @staticmethod
    def _choose_backend(step, args, why):
        step.choice = step.choice or MeasuredChoice(("tvm", "mxnet"), incumbent="mxnet")
        try:
            step.times_ms = _decide(step.choice, {"tvm": lambda: _wait(step.run_in_tvm(*args)),
                                                  "mxnet": lambda: _wait(step.run_in_mxnet(*args))},
                                    why)
        except Exception as error:  # noqa: BLE001 - MXNet runs what TVM fails to run
            step.note = "TVM run failed, runs in MXNet: %s: %s" % (type(error).__name__, error)
            step.choice = False  # never timed again
            step.run, step.backend = step.run_in_mxnet, "mxnet"
            return
        if step.choice.chosen == "tvm":
            step.run, step.backend = step.run_in_tvm, "tvm"
        else:
            step.run, step.backend = step.run_in_mxnet, "mxnet"

    def __call__(self, *arrays):
        if mx.autograd.is_recording():
            raise RuntimeError("a SegmentedGraph runs inference only (TVM gives no backward); "
                               "call it outside autograd.record()")
        if self.check_inputs:
            self._check(arrays)
        run = self._run_whole if self.uses_whole_graph else self._run_plan
        choice = self.choice
        if self._forced or not choice.wants_timing():
            if choice is not None:
                choice.served()
            return run(arrays)
        start = time.perf_counter()
        outputs = run(arrays)
        _wait(outputs)
        choice.served(time.perf_counter() - start)
        why = choice.recheck_due()
        if why:
            self._choose(list(arrays), why)
        return outputs

    def _check(self, arrays):
        if len(arrays) != self._num_inputs:
            raise ValueError("expected %d input arrays, got %d" % (self._num_inputs, len(arrays)))
        for k in self._checked:
            (shape, dtype), array = self._input_types[k], arrays[k]
            if not self._fits(array.shape, shape) or array.dtype != dtype:
                name = self._input_names[k]
                raise ValueError("input %r: the plan was built for shape %s and dtype %s, got "
                                 "%s and %s" % (name, shape, np.dtype(dtype).name, array.shape,
                                                np.dtype(array.dtype).name))

    def check_only(self, input_names):
        """Check just these inputs at each call: the caller guarantees the others
        (a Gluon parameter cannot change its shape). Each checked input costs ~4 us."""
        self._checked = [self._input_names.index(name) for name in input_names]

    @staticmethod
    def _fits(shape, expected):
        return len(shape) == len(expected) and all(
            want is None or want == got for want, got in zip(expected, shape))

    def _run_plan(self, arrays):
        try:
            values = self._values(arrays)
        except TypesChanged as change:
            self.types_changed_calls += 1
            self._types_changed_last = (self._types_changed_last + [str(change)])[-3:]
            return self._run_whole(arrays)
        return [values[k] for k in self._heads]

    def _values(self, arrays):
        values = self._slot_list(arrays)
        for step in self.steps:
            _store(values, step.writes, step.run(*[values[k] for k in step.reads]))
        return values

    def _slot_list(self, arrays):
        """The inputs, then an empty slot per value the segments produce."""
        return list(arrays) + [None] * (self._num_slots - self._num_inputs)

    def _run_whole(self, arrays):
        return _as_list(self._whole(*[arrays[k] for k in self._whole_order]))

    def report(self):
        """Where each segment runs and why: a dict with the plan's and the whole
        graph's last measured times (ms), the choice between them (its
        measurements: when, times, outcome) and, per segment, its backend, op
        count, ops ({op: count}), last times (ms) of each backend tried and its
        choice, compile and tuning seconds (0 when loaded from the cache; None
        when not done), how often its parameters were prepared, and boundary
        reasons; the inputs taken as parameters; and the calls run as one MXNet
        graph because a value typed by running differed (with the last reasons)."""
        return {
            "runs": "one MXNet graph (measured faster than the plan)" if self.uses_whole_graph else
                    "segments",
            "choice": None if self.choice is None else self.choice.report(),
            "plan_ms": self.plan_ms, "whole_graph_mxnet_ms": self.whole_ms,
            "parameters": sorted(self.parameter_names),
            "types_changed": {"calls": self.types_changed_calls,
                              "last": list(self._types_changed_last)},
            "segments": [{"backend": step.backend, "convertible": step.segment.kind == TVM,
                          "ops": len(step.segment.nodes),
                          "op_names": _op_counts(self.graph, step.segment.nodes),
                          "times_ms": step.times_ms, "compile_s": step.compile_s,
                          "choice": step.choice.report() if step.choice else None,
                          "preparations": (None if step.function is None else
                                           step.function.preparations),
                          "tune_s": step.tune_s,
                          "reasons": list(step.segment.reasons) + (
                              [step.note] if step.note else [])}
                         for step in self.steps]}


def _decide(choice, variants, why):
    """Time `variants` (name -> fn) interleaved and let `choice` decide, measuring
    again while it waits to confirm a faster variant; the last times (ms)."""
    choice.decide(interleaved_samples(variants, repeats=REPEATS), why)
    while choice.confirming:
        choice.decide(interleaved_samples(variants, repeats=REPEATS), why + ", confirming")
    return dict(choice.history[-1]["times_ms"])


def _cached_op(symbol, static_shape):
    return mx.nd.CachedOp(symbol, flags=[("static_alloc", True), ("static_shape", static_shape)])


def _op_counts(graph, nodes):
    counts = {}
    for index in nodes:
        counts[graph.nodes[index].op] = counts.get(graph.nodes[index].op, 0) + 1
    return dict(sorted(counts.items()))


def _store(values, slots, results):
    for slot, result in zip(slots, results):
        values[slot] = result


def _as_list(result):
    return list(result) if isinstance(result, (list, tuple)) else [result]


def _wait(arrays):
    for array in arrays:
        array.wait_to_read()
