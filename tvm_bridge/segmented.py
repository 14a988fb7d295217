"""A graph run as segments: TVM where it compiles and measures faster, MXNet elsewhere.

The graph is partitioned (partition.py); each TVM segment is compiled (weights
stay inputs, so one compiled plan serves updated parameters; what depends on
parameters only is prepared when they change, see runtime.CompiledFunction) and
timed on the
example inputs against the same segment as an MXNet CachedOp; the faster one
runs it. MXNet segments (ops with no converter, gluon_dyn's guards) run as
CachedOps, a lone boolean_mask with numpy (host_ops.py); a mask that keeps no
rows makes the call run as one MXNet graph, which fails (or not) as MXNet does.
The rows a mask keeps are a symbolic dim of the segments after it
(value_types.py), so one plan serves every count. Finally the whole plan is timed against one CachedOp of the whole
graph, and the faster of the two serves calls. Every one of these choices is a
gluon_dyn.measure.MeasuredChoice: MXNet stays unless TVM is faster by a margin
in two measurements, and the choices are measured again when the plan serving
calls runs much slower than the alternative did, and at scheduled re-checks;
the report gives each measurement (when, what, the times, the outcome).
A segment whose matrix products measured faster on BLAS alone (gemm_choice.py) is
compiled with TVM's kernels only too, and the two are timed as a whole first:
OpenBLAS's threads and TVM's alternating on the same cores can make the products
slower there than alone, so they stay on BLAS only where the segment gains.
Inference only: training keeps MXNet, whose backward TVM does not provide.

A converter that fails, a segment that does not compile or fails when first
run: MXNet runs that work instead, and the failure is recorded ("failures" in the
report) and said once (failures.py).

A graph whose values after a _cond/_while_loop run in MXNet MXNet cannot infer is
partitioned on types found by running it on the example inputs
(observed_types.py): a TVM segment
reading such a value checks it at each call, and a call where one differs runs
as one MXNet graph (counted in the report), never on code compiled for other
shapes.
"""
import time

import mxnet as mx
import numpy as np
from gluon_dyn.graph_json import DATA_DEPENDENT_SHAPE_OPS, UNINFERABLE_OPS, holds_ops
from gluon_dyn.measure import MeasuredChoice, decide_by_timing, interleaved_samples

from .compiler import compile_module, every_gemm
from .failures import COMPILE, CONVERTER, RUN, describe, failure, warn_first
from .gemm_choice import measured_gemms
from .graph import load_graph
from .host_ops import host_step
from .runtime import as_ndarrays
from .observed_types import TypesChanged, checking_inputs
from .partition import TVM, partition
from .relax_builder import build_segment
from .tuning import tune_module

REPEATS = 15  # timed calls per variant when choosing
PLAN, WHOLE = "plan", "whole graph"  # what serves calls
# The `gemms` option: which matrix products BLAS computes (compile_module's policy).
GEMM_POLICIES = {"measure": measured_gemms, "blas": every_gemm, "tvm": None}
# A segment whose products measured faster on BLAS alone is timed both ways as a whole.
BLAS_PRODUCTS, TVM_KERNELS = "products on BLAS", "TVM's kernels"


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
        # With products on BLAS by measurement: the segment compiled with TVM's kernels
        # only ((function, run) until timed), and the MeasuredChoice between the two.
        self.tvm_kernels = self.kernel_choice = None
        self.times_ms = {}
        self.compile_s = self.tune_s = None
        self.note = ""
        self.data_dependent = ""  # the data-dependent operators it holds, if any
        self.gives_tvm = False    # on TVM, its results stay TVM tensors


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
    `gemms` says which matrix products run on the mxnet wheel's BLAS instead of
    TVM's kernels: "measure" (each product shape timed both ways; the default
    when choosing by measurement), "tvm" (none; the default otherwise) or "blas"
    (every one that can). `whole_symbol` is the graph MXNet runs as WHOLE, an
    equivalent of `symbol` it runs faster (its loops over cells fused); `symbol` by
    default.

    After construction: `steps` (a Step per segment, in order), `choice` (the
    MeasuredChoice between PLAN and WHOLE, one MXNet CachedOp of the graph; None
    without measurement), `uses_whole_graph` (the latter serves calls; setting it
    forces the choice), `check_inputs` (set False when the caller guarantees
    shapes and dtypes; or see check_only), `failures` (where TVM failed and MXNet
    runs instead, failures.py). Each failure is also passed to `on_failure`; by
    default the first is said as a warning.
    """

    def __init__(self, symbol, input_names, example_inputs, symbolic_dims=None, cache_dir=None,
                 choose_by_measurement=True, tune=None, parameter_names=None, gemms=None,
                 whole_symbol=None, on_failure=None):
        if len(input_names) != len(example_inputs):
            raise ValueError("%d input names but %d example inputs"
                             % (len(input_names), len(example_inputs)))
        gemms = gemms or ("measure" if choose_by_measurement else "tvm")
        if gemms not in GEMM_POLICIES:
            raise ValueError("gemms=%r: expected one of %s" % (gemms, ", ".join(GEMM_POLICIES)))
        self._gemms = GEMM_POLICIES[gemms]
        whole_symbol = symbol if whole_symbol is None else whole_symbol
        missing = set(symbol.list_inputs() + whole_symbol.list_inputs()) - set(input_names)
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
        self.failures, self._on_failure = [], on_failure or warn_first()
        segments = partition(graph, shapes, dtypes, symbolic_dims,
                             example_inputs=dict(zip(input_names, example_inputs)))
        for segment in segments:
            if segment.failure:
                (node,) = [graph.nodes[index] for index in segment.nodes]
                self._failed(CONVERTER, "converting op %r (%s)" % (node.op, node.name),
                             segment.failure, "MXNet runs the op")
        # The sizes the examples give the symbolic dims (where BLAS is measured).
        self._dim_values = {dim: shapes[name][axis] for name, axes in (symbolic_dims or {}).items()
                            for axis, dim in axes.items()}
        self.steps = [self._step(segment, shapes, dtypes, symbolic_dims, cache_dir, tune)
                      for segment in segments]
        self._heads = [self._slots[ref] for ref in graph.heads]
        self._pass_tvm_tensors()
        self.whole_symbol = whole_symbol
        self._whole = _cached_op(whole_symbol, self.static_shape)
        self._whole_order = [input_names.index(name) for name in whole_symbol.list_inputs()]
        self.plan_ms = self.whole_ms = None
        self.choice = MeasuredChoice((PLAN, WHOLE), incumbent=WHOLE) if \
            choose_by_measurement else None
        self._forced = None if choose_by_measurement else PLAN
        # Calls run as one MXNet graph since a value typed by running differed.
        self.types_changed_calls, self._types_changed_last = 0, []
        self.calls = {PLAN: 0, WHOLE: 0}   # runs of each, measurements included
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
        step_ops = {self.graph.nodes[i].op for i in segment.nodes}

        def run_in_mxnet(*arrays):
            return _as_list(cached(*[_mxnet(arrays[k]) for k in order]))

        writes = []
        for ref in segment.outputs:
            self._slots[ref] = self._num_slots
            writes.append(self._num_slots)
            self._num_slots += 1
        step = Step(segment, symbol, run_in_mxnet, reads, writes)
        step.data_dependent = ", ".join(sorted(step_ops & set(DATA_DEPENDENT_SHAPE_OPS)))
        if segment.kind == TVM:
            self._compile(step, shapes, dtypes, symbolic_dims, cache_dir, tune)
        on_host = host_step(self.graph, segment)
        if on_host is not None:
            step.run, step.backend = on_host, "host"
        return step

    def _pass_tvm_tensors(self):
        """Let each TVM step give TVM tensors where every reader of its results is a
        step that takes them as they are (a TVM step without values checked at each
        call, numpy's mask) and none is an output; an MXNet step still converts them."""
        readers = {}
        for step in self.steps:
            for slot in step.reads:
                readers.setdefault(slot, []).append(step)
        for step in self.steps:
            step.gives_tvm = step.backend == "tvm" and not set(step.writes) & set(self._heads) \
                and all(reader.backend == "host" or (reader.segment.kind == TVM and
                                                     not reader.segment.observed_inputs)
                        for slot in step.writes for reader in readers.get(slot, ()))

    def _compile(self, step, shapes, dtypes, symbolic_dims, cache_dir, tune):
        """Make `step` run its segment on TVM; if that fails, it stays in MXNet, noted."""
        try:
            module, input_order, output_order = build_segment(
                self.graph, step.segment, shapes, dtypes, symbolic_dims, self.parameter_names)
            if tune:
                step.tune_s = tune_module(module, trials=tune, cache_dir=cache_dir)["seconds"]
            start = time.perf_counter()
            function = compile_module(module, cache_dir=cache_dir, gemms=self._gemms,
                                      dim_values=self._dim_values)
            if function.info["blas_gemms"] and self._gemms is measured_gemms:
                # Products measured faster alone may not be in the segment (OpenBLAS's
                # threads and TVM's alternate on the same cores): both are timed there.
                kernels_only = compile_module(module, cache_dir=cache_dir)
            step.compile_s = 0.0 if function.info.get("from_cache") else \
                time.perf_counter() - start
        except Exception as error:  # noqa: BLE001 - MXNet runs what TVM cannot compile
            step.note = "TVM compile failed, runs in MXNet: %s" % describe(error)
            self._failed(COMPILE, "compiling " + self._describe(step), describe(error),
                         "MXNet runs the segment")
            return
        step.input_order, step.output_order = input_order, output_order
        segment = step.segment
        if segment.observed_inputs:
            names = segment.input_names(self.graph)
            step.note = ("reads %s, typed by running the graph on the example inputs (MXNet "
                         "cannot infer through %s): on TVM, checked at each call; a call "
                         "where they differ runs as one MXNet graph" % (
                             ", ".join(names[k] for k in segment.observed_inputs),
                             "/".join(UNINFERABLE_OPS)))
        step.run_in_tvm, step.function = self._tvm_runner(step, function), function
        if function.info["blas_gemms"] and self._gemms is measured_gemms:
            step.tvm_kernels = kernels_only, self._tvm_runner(step, kernels_only)
        step.run, step.backend = step.run_in_tvm, "tvm"

    def _tvm_runner(self, step, function):
        """run(*arrays) of `step`'s segment on `function` (compiled for its module)."""
        segment = step.segment
        take, give = _function_orders(step)

        # The plan's inputs are checked once, in __call__. Results stay TVM tensors
        # (no MXNet array made) where the steps reading them take those.
        call, call_tvm = function.call_unchecked, function.call_tvm

        def run_in_tvm(*arrays):
            results = _as_list((call_tvm if step.gives_tvm else call)(
                *[arrays[k] for k in take]))
            return [results[k] for k in give]

        if segment.observed_inputs:
            run_in_tvm = checking_inputs(run_in_tvm, {k: segment.input_types[k] for k in
                                                      segment.observed_inputs},
                                         segment.input_names(self.graph))
        return run_in_tvm

    def _choose(self, inputs, why):
        """Time each TVM segment against MXNet on `inputs`; then the whole plan
        against one CachedOp of the graph (MeasuredChoice decides each)."""
        values = self._slot_list(inputs)
        # MXNet's oneDNN kernels keep a weight in a blocked layout of their own, in the
        # array's memory, and TVM reads it back in the plain one: timed on the same
        # arrays, each side re-lays the weights out and TVM prepares its parameters
        # again at every call (LeNet at batch 1: 0.27 ms instead of 0.07). MXNet is
        # timed on copies of the parameters, as it runs when it serves alone.
        copies = {k: inputs[k].copy() for k, name in enumerate(self._input_names)
                  if name in self.parameter_names}
        for step in self.steps:
            args = [values[k] for k in step.reads]
            if step.function is not None and step.choice is not False:
                self._choose_backend(step, args, [copies.get(k, values[k]) for k in step.reads],
                                     why)
            _store(values, step.writes, step.run(*args))
        mxnet_inputs = [copies.get(k, array) for k, array in enumerate(inputs)]
        times = _decide(self.choice, {PLAN: lambda: _wait(self._run_plan(inputs)),
                                        WHOLE: lambda: _wait(self._run_whole(mxnet_inputs))}, why)
        self.plan_ms, self.whole_ms = times[PLAN], times[WHOLE]

    def _choose_backend(self, step, args, mxnet_args, why):
        step.choice = step.choice or MeasuredChoice(("tvm", "mxnet"), incumbent="mxnet")
        try:
            if step.kernel_choice is None and step.tvm_kernels is not None:
                _keep_blas_if_faster(step, args, why)
            step.times_ms = _decide(step.choice, {
                "tvm": lambda: _wait(step.run_in_tvm(*args)),
                "mxnet": lambda: _wait(step.run_in_mxnet(*mxnet_args))}, why)
        except Exception as error:  # noqa: BLE001 - MXNet runs what TVM fails to run
            step.note = "TVM run failed, runs in MXNet: %s" % describe(error)
            self._failed(RUN, "running " + self._describe(step), describe(error),
                         "MXNet runs the segment")
            step.choice = False  # never timed again
            step.run, step.backend = step.run_in_mxnet, "mxnet"
            return
        if step.choice.chosen == "tvm":
            step.run, step.backend = step.run_in_tvm, "tvm"
        else:
            step.run, step.backend = step.run_in_mxnet, "mxnet"

    def _failed(self, stage, what, why, instead):
        record = failure(stage, what, why, instead)
        self.failures.append(record)
        self._on_failure(record)

    def _describe(self, step):
        """A segment as failures name it: its operators."""
        return "the segment of %s" % ", ".join(
            op if count == 1 else "%s x%d" % (op, count)
            for op, count in _op_counts(self.graph, step.segment.nodes).items())

    def __call__(self, *arrays):
        if mx.autograd.is_recording():
            raise RuntimeError("a SegmentedGraph runs inference only (TVM gives no backward); "
                               "call it outside autograd.record()")
        if self.check_inputs:
            self._check(arrays)
        run = self._run_whole if self.uses_whole_graph else self._run_plan
        if self._forced:
            if self.choice is not None:
                self.choice.served()
            return run(arrays)
        return self.choice.serve(lambda: run(arrays), _wait,
                                 lambda why: self._choose(list(arrays), why))

    def lane(self):
        """A PlanLane: __call__ as one function where the plan is one step compiled
        for TVM that gives the graph's outputs; else None."""
        if len(self.steps) != 1:
            return None
        step = self.steps[0]
        if step.function is None or step.data_dependent or step.segment.observed_inputs \
                or not set(self._heads) <= set(step.writes):
            return None
        return PlanLane(self, step)

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
        self.calls[PLAN] += 1
        return [_mxnet(values[k]) for k in self._heads]

    def _values(self, arrays):
        values = self._slot_list(arrays)
        for step in self.steps:
            results = step.run(*[values[k] for k in step.reads])
            if step.data_dependent and step.backend == "mxnet" and \
                    not all(result.size for result in results):
                # What follows an empty mask fails or runs as imperatively only as
                # MXNet runs it (a Dense on no rows raises): the whole graph does.
                raise TypesChanged("%s kept no rows" % step.data_dependent)
            _store(values, step.writes, results)
        return values

    def _slot_list(self, arrays):
        """The inputs, then an empty slot per value the segments produce."""
        return list(arrays) + [None] * (self._num_slots - self._num_inputs)

    def _run_whole(self, arrays):
        self.calls[WHOLE] += 1
        return _as_list(self._whole(*[arrays[k] for k in self._whole_order]))

    def report(self):
        """Where each segment runs and why: a dict with the plan's and the whole
        graph's last measured times (ms), the choice between them (its
        measurements: when, times, outcome) and, per segment, its backend, op
        count, ops ({op: count}), last times (ms) of each backend tried and its
        choice, compile and tuning seconds (0 when loaded from the cache; None
        when not done), how often its parameters were prepared and how many of
        its calls were made in one C call ("native_calls", runtime.tvm_caller), the matrix
        products BLAS computes (gemm_choice.measured_gemms.report() has their
        measurements) and, where those were measured faster alone, the choice
        between the segment with them and with TVM's kernels only, and boundary
        reasons; the inputs taken as parameters; and the calls run as one MXNet
        graph because a value typed by running differed (with the last reasons); the
        runs of the plan and of the whole graph ("calls"); and where TVM failed
        ("failures", failures.py)."""
        return {
            "runs": "one MXNet graph (measured faster than the plan)" if self.uses_whole_graph else
                    "segments",
            "choice": None if self.choice is None else self.choice.report(),
            "plan_ms": self.plan_ms, "whole_graph_mxnet_ms": self.whole_ms,
            "calls": dict(self.calls),
            "failures": list(self.failures),
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
                          "native_calls": (None if step.function is None else
                                           step.function.native_calls),
                          "blas_gemms": ({} if step.function is None else
                                         step.function.info["blas_gemms"]),
                          "kernel_choice": (step.kernel_choice.report() if step.kernel_choice
                                            else None),
                          "tune_s": step.tune_s,
                          "reasons": list(step.segment.reasons) + (
                              [step.note] if step.note else [])}
                         for step in self.steps]}


def _keep_blas_if_faster(step, args, why):
    """Time `step` with its products on BLAS against TVM's kernels only (the incumbent)
    and keep the faster (MeasuredChoice)."""
    kernels_only, run_kernels_only = step.tvm_kernels
    step.kernel_choice = MeasuredChoice((BLAS_PRODUCTS, TVM_KERNELS), incumbent=TVM_KERNELS)
    _decide(step.kernel_choice, {BLAS_PRODUCTS: lambda: _wait(step.run_in_tvm(*args)),
                                 TVM_KERNELS: lambda: _wait(run_kernels_only(*args))},
            why + ", products on BLAS")
    if step.kernel_choice.chosen == TVM_KERNELS:
        step.function, step.run_in_tvm = kernels_only, run_kernels_only
    step.tvm_kernels = None


def _decide(choice, variants, why):
    # interleaved_samples is looked up here, where tests script it.
    return decide_by_timing(choice, variants, why, REPEATS, interleaved_samples)


def _cached_op(symbol, static_shape):
    # static_alloc cannot hold a mask that keeps no rows (an unknown shape to MXNet
    # 1.9.1): a graph with a data-dependent shape infers its shapes node by node.
    if holds_ops(symbol, DATA_DEPENDENT_SHAPE_OPS):
        return mx.nd.CachedOp(symbol)
    return mx.nd.CachedOp(symbol, flags=[("static_alloc", True), ("static_shape", static_shape)])


def _op_counts(graph, nodes):
    counts = {}
    for index in nodes:
        counts[graph.nodes[index].op] = counts.get(graph.nodes[index].op, 0) + 1
    return dict(sorted(counts.items()))


class PlanLane:
    """SegmentedGraph.__call__ of a plan of one compiled step, with its bookkeeping
    (the plan's choice served, its calls counted) and without its layers of slots
    and steps (5 of the 31 us a small policy network's plan took a call). `ready()`
    says whether the next call may take it: the step still runs on TVM, the plan
    serves (not the whole graph), its inputs are not checked and the plan's choice
    does not time the call; `run(arrays)` runs it."""

    def __init__(self, plan, step):
        self._plan, self._step = plan, step
        take, give = _function_orders(step)
        self._take = [step.reads[k] for k in take]
        self._give = [give[step.writes.index(slot)] for slot in plan._heads]

    def ready(self):
        plan = self._plan
        return self._step.run is self._step.run_in_tvm and not plan.check_inputs and \
            not plan.uses_whole_graph and \
            (plan._forced or plan.choice is None or not plan.choice.timing_due())

    def run(self, arrays):
        plan = self._plan
        if plan.choice is not None:
            plan.choice.served()
        plan.calls[PLAN] += 1
        # The step's function as its runner calls it (a measured choice may have
        # replaced it by the same module with other kernels).
        results = _as_list(self._step.function.call_unchecked(*[arrays[k] for k in self._take]))
        return [results[k] for k in self._give]


def _function_orders(step):
    """(take, give) of a step compiled for TVM: its compiled function's arguments as
    positions among the step's inputs, and the step's outputs as positions among the
    function's results."""
    segment = step.segment
    position = {ref: k for k, ref in enumerate(segment.inputs)}
    produced = {ref: k for k, ref in enumerate(step.output_order)}
    return ([position[ref] for ref in step.input_order],
            [produced[ref] for ref in segment.outputs])


def _store(values, slots, results):
    for slot, result in zip(slots, results):
        values[slot] = result


def _as_list(result):
    return list(result) if isinstance(result, (list, tuple)) else [result]


def _wait(arrays):
    for array in arrays:
        if isinstance(array, mx.nd.NDArray):   # TVM has finished its own when it returns
            array.wait_to_read()


def _mxnet(value):
    """An NDArray, or a TVM tensor as one (sharing its memory)."""
    return value if isinstance(value, mx.nd.NDArray) else as_ndarrays([value])[0]
