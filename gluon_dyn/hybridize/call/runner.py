"""Stage 4: the policy of `hybridize(dynamic=True)`, one call at a time.

Profile the first calls (speculation.py), then key the call (cache_key.py), trace
a graph on a miss (capture.py), run it (executor.py); when a guard fails, run the
call as written and stop making that assumption; give up, with one warning
naming the cause, where a graph cannot reproduce the program or is slower than
it (speed_check.py). Every call's way of being served is counted (served.py).
"""
import threading
import warnings

import mxnet as mx
from mxnet import autograd, gluon

from ...ops import ControlFlowError
from ...origin import function_location, user_stacklevel
from ..capturing import arguments, speculation, tracing, truth_probes
from ..passes import fused_cells
from ..partition import graph_breaks
from .cache_key import GraphCache, RepeatedCall, ShapeLadder, key_for
from ..capturing.capture import ExportError, Tracer
from ..capturing.deferred_init import DeferredParameters
from .executor import GraphExecutor, Run
from ..conversion.frames import room_for_converted_code
from ..recursion import NOT_SERVED, RecursionEngine
from .segments import SegmentedForward
from .call_batch import CallBatch, repeat_form
from .call_batching import (GRAPH_BATCH, NOT_DEFERRED, RECURSION_BATCH, Batcher, PendingArray,
                            calls_ran)
from .served import CallCounts, Served
from ..timing.speed_check import GRAPH, PYTHON, SpeedCheck
from ..conversion.transpiler import as_converted, as_written, convert_block, running_as_written
from .tvm_backend import TvmBackend
from ..capturing.weak_binding import BlockReference

# Calls whose arguments need a new graph, before structures that keep changing
# (say, a different parse tree on every call) make the block run as Python.
MISSES_BEFORE_GIVING_UP = 8
LAYOUTS_KEPT = 64
BACKENDS = ("mxnet", "tvm")


class BlockRunner:
    """Replaces `forward` on a block hybridized with dynamic=True."""
    converts_its_block = True    # a dynamic parent leaves this block's tree to it (transpiler.py)

    def __init__(self, block, profile_calls=3, speculate=True, max_guard_failures=1,
                 check_speed=None, backend="mxnet", backend_options=None, batch_calls=False,
                 recursion_only=False, function=None, profile=None, ndarray_code=None,
                 lock=None):
        """`function`: a part of the forward (graph_breaks.py) this runner runs
        instead of the block's forward, speculating from `profile`, the forward's
        (recorded by source line, so it holds for its parts too); or another method
        of the block (methods.py). `ndarray_code`: whether `function` is written for
        NDArrays (a plain Block's forward, a method) rather than for `F` (a
        HybridBlock's hybrid_forward and its parts); by default, as the block's
        forward is. `lock`: shared with the block's other runners. `batch_calls`:
        recorded calls the recursion engine serves are batched across calls
        (call_batching.py). `recursion_only`: a call the recursion engine does not
        serve runs as written, never traced (a CallBatch's callees serve themselves)."""
        if backend not in BACKENDS:
            raise ValueError("hybridize(dynamic=True, backend=%r): the backend is one of %s"
                             % (backend, ", ".join(map(repr, BACKENDS))))
        self.options = dict(profile_calls=profile_calls, speculate=speculate,
                            max_guard_failures=max_guard_failures, check_speed=check_speed,
                            backend=backend, backend_options=backend_options)
        self._block = BlockReference(block)    # weakly: the block holds the runner
        self.function = function or type(block).forward
        self.whole_forward = function is None
        self._forward, self.converted, converted_functions = convert_block(block, function)
        self.profile = profile or speculation.Profile(max_guard_failures)
        self.profile_calls = profile_calls if speculate and profile is None else 0
        if ndarray_code is None:
            ndarray_code = not isinstance(block, gluon.HybridBlock)
        self.tracer = Tracer(self._block, self._forward, ndarray_code,
                             self.profile if speculate else None,
                             function_location(function or _user_forward(block)),
                             converted_functions)
        self.cache, self.ladder = GraphCache(), ShapeLadder()
        self.repeated = RepeatedCall(repeat_form if isinstance(block, CallBatch) else None)
        # The latest call graph_output_type found a graph for (a deferred call).
        self.deferred_repeat = RepeatedCall()
        self.layouts = {}               # of calls of arrays alone, by skeleton (_layout)
        self.speed_check = SpeedCheck(check_speed)
        self.tvm = TvmBackend(**(backend_options or {})) if backend == "tvm" else None
        # A forward recursing over Python data runs on compiled bodies, not a graph
        # per structure (recursion/).
        self.recursion = RecursionEngine.for_block(block, self._forward, self.tvm)
        self.calls = CallCounts()
        self.fallback = None            # why the block runs as Python, once it does
        self.child_runners = []         # its child blocks' own runners, once it runs as Python
        self.internal_errors = []       # traces stopped by a gluon_dyn bug
        self.guard_failures = []
        self.segments = None            # a SegmentedForward once the forward has graph breaks
        self.warned_slower = False      # said once that the speed check chose Python
        self.deferred_calls = 0         # run as written to initialize deferred parameters
        self.running = False
        self.last_call = None           # the latest call's ArgumentSkeleton: what `export` traces
        self.lock = lock or threading.RLock()
        self.batcher = Batcher(self.options, type(self)) if batch_calls else None
        self.recursion_only = recursion_only

    @property
    def block(self):
        return self._block()

    @property
    def original(self):
        """The forward (or part) as written, bound to the block."""
        return self.function.__get__(self.block)

    @property
    def forward(self):
        """The converted forward (or part), bound to the block."""
        return self._forward.__get__(self.block)

    def __call__(self, *args):
        # One call at a time per network: profiles, the graph cache and the
        # running flag are shared (recursive calls re-enter in the same thread).
        with self.lock:
            if self.running or tracing.current() is not None:
                # A recursive call (a tree model calling its own forward), or a call
                # from code being traced (a method calling the forward), is part of
                # the call already being run, or traced: inline it, as that call runs.
                return (self.original if running_as_written() else self.forward)(*args)
            if self.batcher is not None:
                deferred = self.batcher.defer(self, args)
                if deferred is not NOT_DEFERRED:
                    return deferred
                ran = calls_ran()
                if ran is not None:      # a batch runs this call: noted (its effects once)
                    return ran.note(self.block, args, self._served_now)
            return self._served_now(args)

    def _served_now(self, args):
        """The call served now (under self.lock): on a graph, the recursion engine or
        as written."""
        self.running = True
        try:
            repeated = self._repeated(args)
            if repeated is not None:
                # Its skeleton is last_call's. A graph's run runs no converted
                # code: no room or mode set for it.
                return self._repeated_served(*repeated, args)
            if not self.recursion_only:     # a CallBatch is never exported
                self.last_call = arguments.ArgumentSkeleton(args)
            if self.fallback is not None:
                return self._written_with_child_graphs(args)
            if self._written_chosen():
                self.repeated.forget()
                return self._serve(None, args)
            with room_for_converted_code(), as_converted():
                if self.segments is not None:
                    result, served = self.segments(args)
                    self.calls.note(served)
                    return result
                return self._call(args)
        finally:
            self.running = False

    def _written_chosen(self):
        """Whether the call is the speed check's to serve as written (where _call
        would route it): it runs no converted code, so takes none of its room or mode."""
        return self.speed_check.serves_python() and self.segments is None and \
            not self.recursion_only and self.calls.total >= self.profile_calls and \
            not (self.recursion is not None and self.recursion.serving)

    def _profiled(self, args):
        self.calls.note(Served.PROFILING)
        with truth_probes.profiling_as_written(self.profile):
            return self._written(args)

    def batch_kind(self):
        """How a call may join a batch (call_batching.py), or None: no call of the
        block runs, and the recursion engine serves it (it served a call already),
        or its graphs do (its latest call ran on one)."""
        if self.batcher is None or self.running or self.fallback is not None \
                or self.segments is not None:
            return None
        if self.recursion is not None and self.recursion.serving:
            return RECURSION_BATCH if self.recursion.served > 0 else None
        if self.calls.last in (Served.GRAPH, Served.BATCHED) and \
                not self.speed_check.serves_python():
            return GRAPH_BATCH
        return None

    def graph_output_type(self, args):
        """(The OutputType of the block's result on `args`, each array's (shape,
        dtype, context)) when a cached graph serves them, has run on such arguments,
        and returns arrays (in lists and tuples) with no other effect: no state kept
        on blocks, no argument changed; else (None, why not). A call repeating the
        latest one it found a graph for (RepeatedCall) is not keyed again."""
        repeated = self.deferred_repeat.served_by(args, self.block, self.tracer, self.cache)
        if repeated is not None:
            layout, executor, _ = repeated
        else:
            try:
                layout = arguments.ArgumentLayout(args)
            except arguments.Unsupported as error:
                return None, str(error)
            key = key_for(self.block, autograd.is_training(), layout, self.ladder, self.tracer)
            executor = self.cache.peek(key)
            if executor is None:
                return None, "no graph for these arguments yet"
            if not any(isinstance(arg, PendingArray) for arg in args):
                # (A PendingArray's handle would run its batch: never described.)
                self.deferred_repeat.remember(arguments.ArgumentSkeleton(args).of_arrays_alone(),
                                              key, layout, executor, self.cache, args)
        returned = executor.returned_arrays_type()
        if returned is None:
            return None, ("its graph has effects besides the arrays it returns (state kept "
                          "on blocks, arguments changed, running statistics updated)")
        types = executor.returned_types.get(layout.structure)
        if types is None:
            return None, "its graph has not run on arguments of these shapes yet"
        return returned, types

    def served_on_graphs(self):
        """Whether the latest call ran on graphs (or graph segments)."""
        return self.calls.last is not None and self.calls.last.on_graph

    def _repeated(self, args):
        """(layout, executor, whether autograd records) when this call (on `args`)
        repeats the latest one a cached graph served (RepeatedCall) and would be
        served as it was; else None."""
        if self.fallback is not None or self.segments is not None or self.recursion_only or \
                self.speed_check.serves_python() or \
                (self.recursion is not None and self.recursion.serving):
            return None
        return self.repeated.served_by(args, self.block, self.tracer, self.cache)

    def _repeated_served(self, layout, executor, recording, args):
        """A call repeating the latest one `executor` served: an inference call on a
        TVM plan runs through its ExecutorLane where the speed check and the plan
        have nothing to time or measure (executor.py), others as _served_by."""
        if self.tvm is not None and not recording:
            lane = self.repeated.lane(args)
            if lane is not None and lane.ready() and self.speed_check.untimed_graph_call():
                # Not _returning: the call it repeats had its returned types noted.
                return self._run(executor, args, lane)
        return self._served_by(layout, executor, args)

    def _served_by(self, layout, executor, args, key=None, run=None):
        """The call served by `executor` (`run`: by default, or as written, as the
        speed check says); one its graph served is remembered under its `key`
        (RepeatedCall)."""
        result = self._returning(executor, layout, (run or self._serve)(executor, args))
        if key is not None and self.calls.last is Served.GRAPH:
            self.repeated.remember(self.last_call.of_arrays_alone(), key, layout, executor,
                                   self.cache, args)
        return result

    def _call(self, args):
        self.repeated.forget()
        if self.calls.total < self.profile_calls:
            return self._profiled(args)
        if self.recursion is not None and self.recursion.serving:
            try:
                result = self.recursion.serve(args)
            except ControlFlowError:
                raise
            except tracing.FallbackRequired as error:
                if self.recursion_only:
                    return self._written_as_fallback(args)
                return self._fall_back(str(error), args)
            except Exception as error:  # noqa: BLE001 - sorted out by running the call as written
                return self._after_error("%s: %s" % (type(error).__name__, error),
                                         "an internal error stopped the recursion engine", args)
            if result is not NOT_SERVED:
                self.calls.note(Served.RECURSION)
                return result
        if self.recursion_only:
            return self._written_as_fallback(args)
        if self.speed_check.serves_python():
            return self._serve(None, args)
        try:
            layout = self._layout(args)
        except arguments.Unsupported as error:
            return self._fall_back(str(error), args)
        training = autograd.is_training()
        key = key_for(self.block, training, layout, self.ladder, self.tracer)
        executor = self.cache.get(key)
        if executor is not None:
            return self._served_by(layout, executor, args, key)
        calls = self.calls.total + 1
        if self.cache.misses > MISSES_BEFORE_GIVING_UP and self.cache.misses > calls / 2:
            return self._fall_back(
                "the arguments' structure differs on most calls (%d new structures in %d calls); "
                "a graph per structure would be slower than running as Python"
                % (self.cache.misses, calls), args)
        try:
            capture = self.tracer.capture(args, layout, self.ladder.open_dims())
        except ControlFlowError:
            raise
        except DeferredParameters as error:
            # Gluon initializes them on a call as written: one more profiling call.
            self.deferred_calls += 1
            if self.deferred_calls > MISSES_BEFORE_GIVING_UP:
                return self._fall_back("%s on %d calls" % (error, self.deferred_calls), args)
            return self._profiled(args)
        except tracing.FallbackRequired as error:
            refused = self._split(error) if error.breakable else None
            if self.segments is not None:
                result, served = self.segments(args)
                self.calls.note(served)
                return result
            return self._fall_back(str(error) + ("; %s" % refused if refused else ""), args)
        except Exception as error:  # noqa: BLE001 - sorted out by running the call as written
            return self._after_error("%s: %s" % (type(error).__name__, error),
                                     "an internal error stopped the trace", args)
        self.ladder.note_reads(capture.shape_reads)
        executor = GraphExecutor(capture, training, self.tvm, self.ladder.open_dims(),
                                 fused_cells.cells_of(self.block))
        # The trace's shape reads may close dims the key left open: key it afresh.
        key = key_for(self.block, training, layout, self.ladder, self.tracer)
        self.cache.put(key, executor)
        return self._served_by(layout, executor, args, key, self._run)

    def _layout(self, args):
        """The call's ArgumentLayout, its sizes noted on the ladder. A layout of arrays
        alone is kept by their shapes, dtypes and contexts (the skeleton): the next
        call of the same is not walked again, and its sizes are noted already."""
        arrays = self.last_call.of_arrays_alone()
        layout = self.layouts.get(arrays) if arrays is not None else None
        if layout is None:
            layout = arguments.ArgumentLayout(args)
            self.ladder.note_call(layout)
            if arrays is not None and len(self.layouts) < LAYOUTS_KEPT:
                self.layouts[arrays] = layout
        return layout

    def _returning(self, executor, layout, result):
        """`result`, which `executor`'s graph returned for arguments of `layout`
        (its types kept for the block's later calls to be batched with others)."""
        if self.batcher is not None and self.calls.last is Served.GRAPH:
            executor.note_returned(layout.structure, result)
        return result

    def _serve(self, executor, args):
        """The call through the graph or as written, as the speed check says (timing
        it when it asks); `executor` is None when the forward as written serves."""
        plan = self.speed_check.next_variant()
        if plan is None:
            return self._run(executor, args)
        variant, timed = plan
        if executor is None:
            # Routed to the forward as written, but recording a pending sample just
            # made a re-check due, which asks for the graph first: it runs next call.
            variant = PYTHON
        if variant == GRAPH:
            run = lambda: self._run(executor, args)   # noqa: E731
        else:
            run = lambda: self._as_written(args)      # noqa: E731
        result = self.speed_check.timed(variant, run) if timed else run()
        if not timed:
            self.speed_check.record(variant, None)
        if self.speed_check.serves_python() and not self.warned_slower:
            self.warned_slower = True
            warnings.warn("gluon_dyn: %s.%s runs as written: its graphs measured slower (%s); "
                          "the choice is measured again later" % (
                              type(self.block).__name__, self.function.__name__,
                              self.speed_check.choice.history[-1]["times_ms"]),
                          stacklevel=user_stacklevel())
        return result

    def _as_written(self, args):
        self.calls.note(Served.SPEED_CHECK)
        return self._written(args)

    def _written(self, args):
        """The forward (or part) as written, run as without hybridize: its own code
        and its descendants', none of it converted."""
        with as_written():
            return self.original(*args)

    def _written_as_fallback(self, args):
        self.calls.note(Served.FALLBACK)
        return self._written(args)

    def _run(self, executor, args, lane=None):
        """The call run on `executor`'s graph (through `lane`, an ExecutorLane of it, if
        given); as written where the graph failed or a guard did not hold."""
        try:
            run = executor.run(self.block, args) if lane is None else Run(lane.run(args))
        except mx.base.MXNetError as error:
            return self._after_error("MXNetError: %s" % str(error).strip().splitlines()[-1],
                                     "a graph failed where the forward as written runs", args)
        if not run.failed_guards:
            self.calls.note(Served.GRAPH)
            return run.outputs
        # The run's results are dropped and nothing was written back; the call runs
        # as Python, and each failed assumption is not made again (speculation.py).
        # An unrolled loop that ran short fails several guards of one location:
        # that is one failed assumption.
        for guard in {guard.location: guard for guard in run.failed_guards}.values():
            self.guard_failures.append(guard.failure)
            if guard.speculative:
                self.profile.guard_failed(guard.location, guard.failure)
        self.cache.clear()
        self.calls.note(Served.GUARD_FAILED)
        with truth_probes.profiling_as_written(self.profile):
            return self._written(args)

    def _split(self, error):
        """Split the forward (a HybridBlock's hybrid_forward, a method) at the graph
        break `error` names into graph segments (self.segments); else why not."""
        try:
            parts = graph_breaks.split_runner(self.block, self.function, self._forward, error)
        except graph_breaks.CannotSplit as reason:
            return "no graph segments around it: %s" % reason
        self.segments = SegmentedForward(
            self._block, parts, lambda function: BlockRunner(
                self.block, function=function, profile=self.profile,
                ndarray_code=self.tracer.ndarray_code, lock=self.lock, **self.options),
            [{"at": error.location, "why": error.reason}])
        warnings.warn("gluon_dyn: %s.%s runs as graph segments around %s: %s"
                      % (type(self.block).__name__, self.function.__name__, error.location,
                         error.reason), stacklevel=user_stacklevel())
        return None

    def _after_error(self, reason, what, args):
        """A trace stopped, or a graph failed while it ran (before anything was
        written back), on an unexpected error. The call runs as written: if it raises
        too, that is the program's behaviour (a shape error, a Dense on a mask that
        kept no rows), raised as Python raises it, from the user's line; if it runs,
        gluon_dyn was wrong to fail: reported, and the block runs as Python."""
        try:
            result = self._written(args)
        except Exception:
            self.calls.note(Served.RAISED)
            raise
        self.calls.note(Served.FALLBACK)
        self.internal_errors.append(reason)
        self._give_up("%s (%s); please report it" % (what, reason))
        return result

    def _fall_back(self, reason, args):
        self._give_up(reason)
        self._children_on_their_own()
        return self._written_with_child_graphs(args)

    def _children_on_their_own(self):
        """A forward that runs as Python breaks its graph at its child blocks: each
        child gets a runner of its own, as Gluon's hybridize gives each HybridBlock
        below a Block a graph (a sampler's loop of host reads around a model's
        step). Each child's speed check keeps its graphs only where they are faster."""
        if not self.whole_forward:
            return
        for child in self.block._children.values():  # pylint: disable=protected-access
            if not isinstance(vars(child).get("forward"), BlockRunner):
                child.hybridize(dynamic=True, **self.options)
                self.child_runners.append(vars(child)["forward"])

    def _child_graph_calls(self):
        return sum(runner.calls.on_graph for runner in self.child_runners)

    def _written_with_child_graphs(self, args):
        """The call as written; served on graphs if its children's runners served
        any of their calls in it on graphs."""
        before = self._child_graph_calls()
        result = self._written(args)
        self.calls.note(Served.CHILD_GRAPHS if self._child_graph_calls() > before
                        else Served.FALLBACK)
        return result

    def _give_up(self, reason):
        self.fallback = reason
        warnings.warn("gluon_dyn: %s.%s runs imperatively: %s" % (
                          type(self.block).__name__, self.function.__name__, reason),
                      stacklevel=user_stacklevel())

    def export_capture(self, options):
        """The general graph of the forward (capture.ExportOptions), traced on the
        latest call's arguments; an ExportError names what cannot be exported."""
        with self.lock:
            if self.last_call is None:
                raise ExportError("call %s once before export: the call gives the arguments' "
                                  "structure, dtypes and ranks" % type(self.block).__name__)
            try:
                args = self.last_call.arguments()
                layout = arguments.ArgumentLayout(args)
                with as_converted():
                    return self.tracer.capture(args, layout, export=options)
            except (arguments.Unsupported, tracing.FallbackRequired) as error:
                raise ExportError(str(error)) from None

    def report(self):
        return {"converted": list(self.converted), "cached_graphs": len(self.cache),
                "traces": self.tracer.traces, "fallback": self.fallback,
                "internal_errors": list(self.internal_errors),
                "calls": self.calls.report(),
                "deferred_state": {
                    "numbers": sorted(self.tracer.number_paths),
                    "containers": sorted(self.tracer.containers_written),
                    "containers_in_key": sorted(self.tracer.containers_written &
                                                self.tracer.containers_read)},
                "guard_failures": list(self.guard_failures),
                "speed_check": self.speed_check.report(),
                "tvm": self.tvm.report(self.cache.values()) if self.tvm is not None else None,
                "partitioned": [report for report in (executor.partition_report()
                                                      for executor in self.cache.values()) if report],
                "inference_graphs": [report for report in (executor.inference_report()
                                                           for executor in self.cache.values())
                                     if report],
                "recorded_graphs": [report for report in (executor.recording_report()
                                                          for executor in self.cache.values())
                                    if report],
                "recursion": self.recursion.report() if self.recursion is not None else None,
                "batched_calls": self.batcher.report() if self.batcher is not None else None,
                "not_speculated": {where: "assumption failed %d times, last: %s"
                                   % (self.profile.failures[where], self.profile.last_failure[where])
                                   for where in sorted(self.profile.relaxed)},
                "cache_misses": list(self.cache.miss_reasons),
                "graph_segments": self.segments.report() if self.segments is not None else None,
                "child_runners": {runner.block.name: runner.report()
                                  for runner in self.child_runners},
                "statements": {where: str(fate)
                               for where, fate in sorted(self.tracer.statements.items())}}


def _user_forward(block):
    """The method of `block` its user wrote: hybrid_forward, or a plain Block's forward."""
    return type(block).hybrid_forward if isinstance(block, gluon.HybridBlock) else \
        type(block).forward
