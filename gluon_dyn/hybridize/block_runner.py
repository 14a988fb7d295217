"""`Block.hybridize(dynamic=True)`: a plain Block's imperative forward, run as cached graphs.

The block's `forward` (and those of its plain child Blocks) is converted, then
traced on Symbols once per key: the training mode, the Python attributes of the
block tree (see dynamic.python_state) and the shapes and dtypes of the inputs.
NDArrays kept on the blocks (say `self.state`) are graph inputs, and those the
forward assigns become extra graph outputs, written back only after the whole
graph has run. Anything a graph cannot replay (host reads such as `.asscalar()`,
`print`, Python state changed while running, Python objects as arguments) makes
that forward run as Python, with one warning naming the cause.
"""
import collections
import json
import threading
import warnings

import mxnet as mx
from mxnet import autograd, gluon

from ..ops import ControlFlowError
from .. import graph_json, native
from . import arguments, speculation, tracing
from .python_state import (as_list, changed_values, container_contents, holding_symbols, like,
                           owner_of, public_attributes, python_state, restore, restore_contents,
                           tensor_attributes)
from ..origin import user_stacklevel
from .speed_check import SpeedCheck
from .transpiler import convert
from .tvm_backend import TvmBackend

MAX_GRAPHS = 16
# Calls whose arguments need a new graph, before structures that keep changing
# (say, a different parse tree on every call) make the block run as Python.
MISSES_BEFORE_GIVING_UP = 8


class TracedGraph:
    """One cached graph and how to feed it and read it back."""

    def __init__(self, symbol, exact, input_sources, num_outputs, out_format, state_paths):
        self.symbol, self.exact = symbol, exact
        # Inference runs with memory (and shapes, if exact) planned once. Recorded
        # runs use a CachedOp without static_alloc: with it MXNet 1.9.1 computes
        # wrong input gradients for some graphs (tests/test_generated_programs.py,
        # "static_alloc backward").
        self.cached_op = mx.nd.CachedOp(symbol, flags=_cached_op_flags(symbol, exact))
        self._recording_op = None
        self.input_sources = input_sources  # per graph input: ("arg", i) / ("state", path) / ("param", p) / ("captured", array)
        self.num_outputs = num_outputs
        self.out_format = out_format
        self.state_paths = state_paths      # attributes written back from the trailing outputs
        self.reads_state = any(kind == "state" for kind, _ in input_sources)

    def op_for_this_call(self):
        if not autograd.is_recording():
            return self.cached_op
        if self._recording_op is None:
            self._recording_op = mx.nd.CachedOp(self.symbol)
        return self._recording_op


class BlockRunner:
    """Replaces `forward` on a block hybridized with dynamic=True.

    For a plain Block the forward itself (and plain child Blocks' forwards) is
    converted, and it is code written for NDArrays; for a HybridBlock the
    hybrid_forward methods of the tree are converted (written for `F`), and
    MXNet's own HybridBlock.forward calls them with Symbols while tracing.
    """

    def __init__(self, block, profile_calls=3, speculate=True, max_guard_failures=1,
                 check_speed=None, backend="mxnet", backend_options=None):
        self.block = block
        self.original = type(block).forward.__get__(block)
        self.ndarray_code = not isinstance(block, gluon.HybridBlock)
        self.graphs = collections.OrderedDict()
        self.traces = 0
        self.fallback = None
        self.statements = {}
        self.profile = speculation.Profile(max_guard_failures)
        self.profile_calls = profile_calls
        self.speculate = speculate
        self.calls = 0
        self.read_dims = {}     # argument array index -> shape dimensions traced code read
        self.sizes = {}         # (argument array index, dimension) -> sizes seen
        self.running = False
        self.misses = 0
        self.guard_failures = []
        self.last_guard_failure = {}   # location -> message of its latest failed guard
        self.speed_check = SpeedCheck(check_speed)
        self.lock = threading.RLock()
        if backend not in ("mxnet", "tvm"):
            raise ValueError("hybridize(dynamic=True, backend=%r): the backend is 'mxnet' or 'tvm'"
                             % (backend,))
        self.tvm = TvmBackend(**(backend_options or {})) if backend == "tvm" else None
        self.cache_misses = []      # why recent calls needed a new graph (the last 10)
        if self.ndarray_code:
            self.forward = convert(type(block).forward).__get__(block)
            self.converted = ["%s.forward" % type(block).__name__]
            converting = _plain_children(block)
            method = "forward"
        else:
            self.forward = self.original
            self.converted = []
            converting = _user_hybrid_blocks(block)
            method = "hybrid_forward"
        for node in converting:
            setattr(node, method, convert(getattr(type(node), method)).__get__(node))
            self.converted.append("%s.%s" % (type(node).__name__, method))

    def __call__(self, *args):
        # One call at a time per network: profiles, the graph cache and the
        # running flag are shared (recursive calls re-enter in the same thread).
        with self.lock:
            return self._call_once(args)

    def _call_once(self, args):
        if self.fallback is not None and not self.running:
            # As written: converted code running on NDArrays only adds overhead.
            return self.original(*args)
        if self.fallback is not None or self.running:
            # A recursive call (a tree model calling its own forward) is part of the
            # call already being run, or traced: inline it.
            return self.forward(*args)
        self.running = True
        try:
            return self._call(args)
        finally:
            self.running = False

    def _call(self, args):
        self.calls += 1
        if self.speculate and self.calls <= self.profile_calls:
            with speculation.profiling(self.profile):
                return self.forward(*args)
        try:
            layout = arguments.ArgumentLayout(args)
        except arguments.Unsupported as error:
            return self._fall_back(str(error), args)
        self._note_sizes(layout)
        state = (autograd.is_training(), python_state(self.block))
        key = state + (arguments.relaxed_structure(layout, self._relaxed_dims()),)
        graph = self.graphs.get(key)
        if graph is None:
            self.misses += 1
            if self.graphs:
                self.cache_misses.append(miss_reason(next(reversed(self.graphs)), key))
                del self.cache_misses[:-10]
            if self.misses > MISSES_BEFORE_GIVING_UP and self.misses > self.calls / 2:
                return self._fall_back(
                    "the arguments' structure differs on most calls (%d new structures in %d "
                    "calls); a graph per structure would be slower than running as Python"
                    % (self.misses, self.calls), args)
            try:
                graph = self._trace(args, layout)
            except ControlFlowError:
                raise
            except Exception as error:  # noqa: BLE001 - whatever stops the trace, Python can run
                reason = str(error) if isinstance(error, tracing.FallbackRequired) else \
                    "%s: %s" % (type(error).__name__, error)
                return self._fall_back(reason, args)
            # Shape relaxation: a graph serves every size of a dimension that has varied
            # and that no trace read (exact shapes first, as JANUS: (4,8), (3,8) -> (?,8)).
            key = state + (arguments.relaxed_structure(layout, self._relaxed_dims()),)
            self.graphs[key] = graph
            while len(self.graphs) > MAX_GRAPHS:
                self.graphs.popitem(last=False)
            return self._run(graph, args)
        return self._run_checking_speed(graph, args)

    def _run_checking_speed(self, graph, args):
        variant = self.speed_check.next_variant()
        if variant is None:
            return self._run(graph, args)
        run = (lambda: self._run(graph, args)) if variant == "graph" else \
            (lambda: self.original(*args))
        result = self.speed_check.timed(variant, run)
        if self.speed_check.graph_is_slower():
            medians = self.speed_check.medians()
            self._give_up("the graphs measured slower than the forward as written (%.3f ms vs "
                          "%.3f ms per call)" % (medians["graph"], medians["python"]))
        return result

    def _note_sizes(self, layout):
        for leaf, shape in enumerate(arguments.array_shapes(layout)):
            for dim, size in enumerate(shape):
                self.sizes.setdefault((leaf, dim), set()).add(size)

    def _relaxed_dims(self):
        relaxed = {}
        for (leaf, dim), sizes in self.sizes.items():
            if len(sizes) > 1 and leaf in self.read_dims and dim not in self.read_dims[leaf]:
                relaxed.setdefault(leaf, set()).add(dim)
        return relaxed

    def _fall_back(self, reason, args):
        self._give_up(reason)
        return self.forward(*args)

    def _give_up(self, reason):
        self.fallback = reason
        warnings.warn("gluon_dyn: %s.forward runs imperatively: %s" % (type(self.block).__name__,
                                                                        reason),
                      stacklevel=user_stacklevel())

    def _trace(self, args, layout):
        self.traces += 1
        prefix = self.block.prefix.rstrip("_") or "block"
        sources, shapes, symbols = {}, {}, list(args)
        replaced = []
        try:
            for i, path in enumerate(layout.leaves):
                name = "%s_data%d" % (prefix, i)
                array = arguments.put(symbols, path, mx.sym.var(name))
                replaced.append((path, array))
                sources[name], shapes[name] = ("arg", path), array.shape
            graph, trace = self._trace_with(prefix, sources, shapes, symbols)
            for i in range(len(layout.leaves)):
                read = trace.shape_reads.get("%s_data%d" % (prefix, i), set())
                self.read_dims.setdefault(i, set()).update(read)
            return graph
        finally:
            for path, array in reversed(replaced):
                arguments.put(symbols, path, array)

    def _trace_with(self, prefix, sources, shapes, symbols):
        saved = public_attributes(self.block)
        containers = container_contents(self.block)   # before state is swapped for variables
        states = tensor_attributes(self.block)
        substituted = {}
        for path, (owner, attr, value) in states.items():
            variables = []
            for j, array in enumerate(as_list(value)):
                name = "%s_state_%s_%d" % (prefix, path.replace(".", "_"), j)
                sources[name], shapes[name] = ("state", (path, j)), array.shape
                variables.append(mx.sym.var(name))
            substituted[path] = like(value, variables)
            setattr(owner, attr, substituted[path])
        params = {p.name: p for p in self.block.collect_params().values()}
        shapes.update({name: p.shape for name, p in params.items() if p.shape and all(p.shape)})
        trace = tracing.Trace(prefix, shapes, ndarray_code=self.ndarray_code)
        trace.profile = self.profile if self.speculate else None
        before = python_state(self.block)
        try:
            with tracing.tracing(trace):
                try:
                    out = self.forward(*symbols)
                finally:
                    self.statements.update(trace.statements)
        except BaseException:
            # All or nothing: a trace that stops leaves no trace of itself behind.
            restore(self.block, saved, everything=True)
            restore_contents(containers)
            raise
        # State the forward assigned (an attribute it left as it was is not written back).
        written = {path: value for path, (_, _, value) in tensor_attributes(self.block).items()
                   if any(isinstance(v, mx.sym.Symbol) for v in as_list(value))
                   and value is not substituted.get(path)}
        restore(self.block, saved, everything=False)   # state attributes: written back after runs
        leaked = holding_symbols(self.block, containers)
        if leaked:
            # Traced values stored into a list or dict: they cannot be written back
            # from the graph, so the forward runs as Python.
            restore(self.block, saved, everything=True)
            restore_contents(containers)
            raise tracing.FallbackRequired("the forward stores graph values into %s (a %s it "
                                           "keeps), which a graph cannot write back" % leaked,
                                           type(self.block).__name__)
        changed = changed_values(before, python_state(self.block))
        if changed:
            # A graph cannot replay Python side effects: undo the trace's, and the
            # forward runs as Python (from this call on, so they happen once per call).
            restore(self.block, saved, everything=True)
            restore_contents(containers)
            raise tracing.FallbackRequired("the forward changes Python state (%s) while it runs"
                                           % ", ".join(changed), type(self.block).__name__)
        outputs, out_format = _flatten_outputs(out)
        state_paths = [(path, type(value), len(as_list(value))) for path, value in written.items()]
        state_outputs = [v for value in written.values() for v in as_list(value)]
        # Each guard's check is an extra output, so that it runs; a failed one fails the run.
        checks = [native.assert_true(mx.sym, guard.holds, message=guard.message)[0]
                  for guard in trace.guards]
        # An output that is an input as it came (`return x`) must be a node of the
        # graph for MXNet's backward: pass it through identity.
        graph = mx.sym.Group([mx.sym.identity(o) if o.get_children() is None else o
                              for o in outputs + state_outputs] + checks)
        captured = {var.name: array for var, array in trace.captured.values()}
        input_sources = []
        for name in graph.list_inputs():
            if name in sources:
                input_sources.append(sources[name])
            elif name in params:
                input_sources.append(("param", params[name]))
            elif name in captured:
                input_sources.append(("captured", captured[name]))
            else:
                # A placeholder of a loop or branch body read outside that body.
                raise tracing.FallbackRequired(
                    "a value computed inside a graph loop or branch is used outside it (for example "
                    "appended to a list inside a loop on a tensor); graph input %r" % name,
                    type(self.block).__name__)
        exact = not self._relaxed_dims()
        traced = TracedGraph(graph, exact, input_sources, len(outputs), out_format, state_paths)
        traced.guards = trace.guards
        traced.blocks = _block_tree(self.block)  # see python_state._block_state
        traced.ops = [node["op"] for node in json.loads(graph.tojson())["nodes"]]
        return traced, trace

    def _run(self, graph, args):
        states = tensor_attributes(self.block) if graph.reads_state else None
        inputs = []
        for kind, what in graph.input_sources:
            if kind == "arg":
                inputs.append(arguments.get(args, what))
            elif kind == "state":
                # Detached: its history (the previous call's graph) is usually freed by
                # that call's backward, and MXNet's cached graphs cannot take such an
                # array as a recorded input.
                path, j = what
                inputs.append(as_list(states[path][2])[j].detach())
            elif kind == "param":
                inputs.append(what.data())
            else:
                inputs.append(what)
        plan = self.tvm.plan_for(graph, inputs) if self.tvm is not None else None
        try:
            results = plan(*inputs) if plan is not None else graph.op_for_this_call()(*inputs)
        except mx.base.MXNetError as error:
            # Some runs execute synchronously and a failed guard raises here, not at
            # the first read; other guards of the run may still be pending.
            failed = [_guard_named(graph, error)] + self._failed_guards(graph, ())
            return self._after_failed_guards([guard for guard in failed if guard], args)
        results = list(results) if isinstance(results, (list, tuple)) else [results]
        if graph.guards:
            failed = self._failed_guards(graph, results[len(results) - len(graph.guards):])
            if failed:
                return self._after_failed_guards(failed, args)
        # State is written back only now that the whole graph has run.
        position = graph.num_outputs
        for path, kind, count in graph.state_paths:
            owner, attr = owner_of(self.block, path)
            values = results[position:position + count]
            setattr(owner, attr, values[0] if kind is mx.sym.Symbol else kind(values))
            position += count
        if plan is None and self.tvm is not None:
            self.tvm.after_mxnet_run(graph, inputs)
        return _regroup(results[:graph.num_outputs], graph.out_format)

    @staticmethod
    def _failed_guards(graph, checks):
        """The guards that failed in this run. Each failed assertion raises MXNet's
        error once, at the first wait on it: wait on every check (or on everything
        when the checks are unknown), so that none is left to surface later."""
        failed = []
        waits = [check.wait_to_read for check in checks] or [mx.nd.waitall] * len(graph.guards)
        for wait in waits:
            try:
                wait()
            except mx.base.MXNetError as error:
                guard = _guard_named(graph, error)
                if guard is not None:
                    failed.append(guard)
        return failed

    def _after_failed_guards(self, guards, args):
        # The run's results are dropped and nothing was written back; the call runs
        # as Python, and each failed assumption is not made again (see speculation).
        # An unrolled loop that ran short fails several guards of one location:
        # that is one failed assumption.
        guards = list({guard.location: guard for guard in reversed(guards)}.values())
        _drain_failed_asserts()
        for guard in guards:
            self.guard_failures.append(guard.message)
            self.last_guard_failure[guard.location] = guard.message
            self.profile.guard_failed(guard.location)
        if guards:   # (none: only a late error of an earlier run surfaced; graphs stand)
            self.graphs.clear()
        with speculation.profiling(self.profile):
            return self.forward(*args)

    def report(self):
        return {"converted": list(self.converted), "cached_graphs": len(self.graphs),
                "traces": self.traces, "fallback": self.fallback,
                "guard_failures": list(self.guard_failures),
                "speed_check_ms": self.speed_check.medians(),
                "tvm": self.tvm.report(self.graphs.values()) if self.tvm is not None else None,
                "not_speculated": {where: "assumption failed %d times, last: %s"
                                   % (self.profile.failures[where], self.last_guard_failure[where])
                                   for where in sorted(self.profile.relaxed)},
                "cache_misses": list(self.cache_misses),
                "statements": {where: "%s: %s" % fate
                               for where, fate in sorted(self.statements.items())}}


def _block_tree(block):
    blocks = [block]
    for child in block._children.values():
        blocks += _block_tree(child)
    return blocks


def _guard_named(graph, error):
    """The guard of `graph` whose assertion raised `error`; None for the assertion
    of an earlier run (already handled, surfacing late); other errors propagate."""
    for guard in graph.guards:
        if native.ASSERT_PREFIX + guard.message in str(error):
            return guard
    if native.ASSERT_PREFIX in str(error):
        return None
    raise error


def _drain_failed_asserts():
    """Wait for all of MXNet's work, consuming the errors of a failed run. MXNet
    keeps an op's error for every array computed from its outputs and rethrows
    each at a later `waitall`: without this, a guard that failed in this run
    would surface in the user's next `mx.nd.waitall()`."""
    while True:
        try:
            mx.nd.waitall()
            return
        except mx.base.MXNetError as error:
            if native.ASSERT_PREFIX not in str(error):
                raise


def miss_reason(cached, key):
    """Why `key` does not match the graph cached under `cached`, readably:
    "argument array 0 dim 0: expected 4, got 3", "Python value use_gate: ..."."""
    (training_then, state_then, args_then), (training, state, args) = cached, key
    if training_then != training:
        return "training mode: expected %s, got %s" % (training_then, training)
    then = dict(state_then)
    for name, value in state:
        if name in then and then[name] != value:
            if isinstance(value, tuple) and value[0] == "block":
                return "child block %s was replaced" % name
            return "Python value %s: expected %r, got %r" % (name, then[name], value)
    arrays_then = [part for part in args_then if part[0] == "array"]
    arrays = [part for part in args if part[0] == "array"]
    if len(arrays_then) == len(arrays) and len(args_then) == len(args):
        for index, (old, new) in enumerate(zip(arrays_then, arrays)):
            if len(old[1]) != len(new[1]):
                return "argument array %d: expected %d dimensions, got %d" % (
                    index, len(old[1]), len(new[1]))
            for dim, (size_then, size) in enumerate(zip(old[1], new[1])):
                if size_then is not None and size_then != size:
                    return "argument array %d dim %d: expected %s, got %s" % (
                        index, dim, size_then, size)
            if old[2] != new[2]:
                return "argument array %d dtype: expected %s, got %s" % (index, old[2], new[2])
    return "the arguments' structure differs (%d parts, was %d)" % (len(args), len(args_then))


def _user_hybrid_blocks(block):
    """The block and its HybridBlock descendants whose hybrid_forward is user code."""
    if type(block).hybrid_forward.__module__.split(".")[0] != "mxnet":
        yield block
    for child in block._children.values():
        if isinstance(child, gluon.HybridBlock):
            yield from _user_hybrid_blocks(child)


def _plain_children(block):
    for child in block._children.values():
        if not isinstance(child, gluon.HybridBlock):
            yield child
            yield from _plain_children(child)


def _cached_op_flags(graph, exact):
    """Memory is planned once per graph; shapes too when the graph serves one set of
    input shapes (`exact`) and holds no _cond/_while_loop node, whose output shapes
    MXNet 1.9.1 knows only once it has run."""
    flags = [("static_alloc", True)]
    if exact and not graph_json.holds_ops(graph, graph_json.UNINFERABLE_OPS):
        flags.append(("static_shape", True))
    return flags


def _flatten_outputs(out):
    if isinstance(out, mx.sym.Symbol):
        return [out], None
    if isinstance(out, (list, tuple)) and all(isinstance(o, mx.sym.Symbol) for o in out):
        return list(out), len(out)
    raise tracing.FallbackRequired("the forward returns %s, not arrays" % type(out).__name__,
                                   "return")


def _regroup(results, out_format):
    return results[0] if out_format is None else results
