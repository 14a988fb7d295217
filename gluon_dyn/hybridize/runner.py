"""Stage 4: the policy of `hybridize(dynamic=True)`, one call at a time.

Profile the first calls (speculation.py), then key the call (cache_key.py), trace
a graph on a miss (capture.py), run it (executor.py); when a guard fails, run the
call as written and stop making that assumption; give up, with one warning
naming the cause, where a graph cannot reproduce the program or is slower than
it (speed_check.py). Every call's way of being served is counted (served.py).
"""
import threading
import warnings

from mxnet import autograd, gluon

from ..ops import ControlFlowError
from ..origin import user_stacklevel
from . import arguments, speculation, tracing
from .cache_key import GraphCache, ShapeLadder, key_for
from .capture import Tracer
from .executor import GraphExecutor
from .frames import room_for_converted_code
from .recursion import NOT_SERVED, RecursionEngine
from .served import CallCounts, Served
from .speed_check import GRAPH, PYTHON, SpeedCheck
from .transpiler import convert_block
from .tvm_backend import TvmBackend

# Calls whose arguments need a new graph, before structures that keep changing
# (say, a different parse tree on every call) make the block run as Python.
MISSES_BEFORE_GIVING_UP = 8
BACKENDS = ("mxnet", "tvm")


class BlockRunner:
    """Replaces `forward` on a block hybridized with dynamic=True."""

    def __init__(self, block, profile_calls=3, speculate=True, max_guard_failures=1,
                 check_speed=None, backend="mxnet", backend_options=None):
        if backend not in BACKENDS:
            raise ValueError("hybridize(dynamic=True, backend=%r): the backend is one of %s"
                             % (backend, ", ".join(map(repr, BACKENDS))))
        self.block = block
        self.original = type(block).forward.__get__(block)
        self.forward, self.converted = convert_block(block)
        self.profile = speculation.Profile(max_guard_failures)
        self.profile_calls = profile_calls if speculate else 0
        self.tracer = Tracer(block, self.forward, not isinstance(block, gluon.HybridBlock),
                             self.profile if speculate else None)
        self.cache, self.ladder = GraphCache(), ShapeLadder()
        self.speed_check = SpeedCheck(check_speed)
        self.tvm = TvmBackend(**(backend_options or {})) if backend == "tvm" else None
        # A forward recursing over Python data runs on compiled bodies, not a graph
        # per structure (recursion/).
        self.recursion = RecursionEngine.for_block(block, self.forward, self.tvm)
        self.calls = CallCounts()
        self.fallback = None            # why the block runs as Python, once it does
        self.internal_errors = []       # traces stopped by a gluon_dyn bug
        self.guard_failures = []
        self.last_guard_failure = {}    # location -> message of its latest failed guard
        self.running = False
        self.lock = threading.RLock()

    def __call__(self, *args):
        # One call at a time per network: profiles, the graph cache and the
        # running flag are shared (recursive calls re-enter in the same thread).
        with self.lock:
            if self.running:
                # A recursive call (a tree model calling its own forward) is part of
                # the call already being run, or traced: inline it.
                return self.forward(*args)
            if self.fallback is not None:
                self.calls.note(Served.FALLBACK)
                return self.original(*args)
            self.running = True
            try:
                with room_for_converted_code():
                    return self._call(args)
            finally:
                self.running = False

    def _call(self, args):
        if self.calls.total < self.profile_calls:
            self.calls.note(Served.PROFILING)
            with speculation.profiling(self.profile):
                return self.forward(*args)
        if self.recursion is not None and self.recursion.serving:
            try:
                result = self.recursion.serve(args)
            except ControlFlowError:
                raise
            except tracing.FallbackRequired as error:
                return self._fall_back(str(error), args)
            except Exception as error:  # noqa: BLE001 - sorted out by running the call as written
                return self._after_trace_error(error, args)
            if result is not NOT_SERVED:
                self.calls.note(Served.RECURSION)
                return result
        try:
            layout = arguments.ArgumentLayout(args)
        except arguments.Unsupported as error:
            return self._fall_back(str(error), args)
        self.ladder.note_call(layout)
        training = autograd.is_training()
        key = key_for(self.block, training, layout, self.ladder, self.tracer.number_paths)
        executor = self.cache.get(key)
        if executor is not None:
            return self._serve(executor, args)
        calls = self.calls.total + 1
        if self.cache.misses > MISSES_BEFORE_GIVING_UP and self.cache.misses > calls / 2:
            return self._fall_back(
                "the arguments' structure differs on most calls (%d new structures in %d calls); "
                "a graph per structure would be slower than running as Python"
                % (self.cache.misses, calls), args)
        try:
            capture = self.tracer.capture(args, layout, exact=not self.ladder.open_dims())
        except ControlFlowError:
            raise
        except tracing.FallbackRequired as error:
            return self._fall_back(str(error), args)
        except Exception as error:  # noqa: BLE001 - sorted out by running the call as written
            return self._after_trace_error(error, args)
        self.ladder.note_reads(capture.shape_reads)
        executor = GraphExecutor(capture, self.tvm)
        # The trace's shape reads may close dims the key left open: key it afresh.
        self.cache.put(key_for(self.block, training, layout, self.ladder, self.tracer.number_paths),
                       executor)
        return self._run(executor, args)

    def _serve(self, executor, args):
        variant = self.speed_check.next_variant()
        if variant is None:
            return self._run(executor, args)
        if variant == GRAPH:
            result = self.speed_check.timed(variant, lambda: self._run(executor, args))
        else:
            self.calls.note(Served.SPEED_CHECK)
            result = self.speed_check.timed(variant, lambda: self.original(*args))
        if self.speed_check.graph_is_slower():
            medians = self.speed_check.medians()
            self._give_up("the graphs measured slower than the forward as written (%.3f ms vs "
                          "%.3f ms per call)" % (medians[GRAPH], medians[PYTHON]))
        return result

    def _run(self, executor, args):
        run = executor.run(self.block, args)
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
                self.last_guard_failure[guard.location] = guard.failure
                self.profile.guard_failed(guard.location)
        self.cache.clear()
        self.calls.note(Served.GUARD_FAILED)
        with speculation.profiling(self.profile):
            return self.forward(*args)

    def _after_trace_error(self, error, args):
        """A trace stopped on an unexpected error. If the call as written raises too,
        that is the program's behaviour (say, a shape error), raised as Python raises
        it; if it runs, the trace failed where it should not have: a gluon_dyn bug,
        reported, and the block runs as Python."""
        try:
            result = self.forward(*args)
        except Exception:
            self.calls.note(Served.RAISED)
            raise
        self.calls.note(Served.FALLBACK)
        reason = "%s: %s" % (type(error).__name__, error)
        self.internal_errors.append(reason)
        self._give_up("an internal error stopped the trace (%s); please report it" % reason)
        return result

    def _fall_back(self, reason, args):
        self._give_up(reason)
        self.calls.note(Served.FALLBACK)
        return self.forward(*args)

    def _give_up(self, reason):
        self.fallback = reason
        warnings.warn("gluon_dyn: %s.forward runs imperatively: %s" % (type(self.block).__name__,
                                                                        reason),
                      stacklevel=user_stacklevel())

    def report(self):
        return {"converted": list(self.converted), "cached_graphs": len(self.cache),
                "traces": self.tracer.traces, "fallback": self.fallback,
                "internal_errors": list(self.internal_errors),
                "calls": self.calls.report(),
                "guard_failures": list(self.guard_failures),
                "speed_check": self.speed_check.report(),
                "tvm": self.tvm.report(self.cache.values()) if self.tvm is not None else None,
                "recursion": self.recursion.report() if self.recursion is not None else None,
                "not_speculated": {where: "assumption failed %d times, last: %s"
                                   % (self.profile.failures[where], self.last_guard_failure[where])
                                   for where in sorted(self.profile.relaxed)},
                "cache_misses": list(self.cache.miss_reasons),
                "statements": {where: str(fate)
                               for where, fate in sorted(self.tracer.statements.items())}}
