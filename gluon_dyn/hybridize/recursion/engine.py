"""The recursion engine: a forward that recurses over Python data, run as
compiled bodies, batched across the nodes of a call.

Per call: the nodes are discovered and matched to bodies by signature
(discovery.py), a node whose signature is new is traced once (body.py), the
nodes are grouped by height and body (schedule.py), and the groups run as one
whole-call program, the groups' graphs composed into one graph kept per
sequence of bodies (call_program.py), or group by group, each group one call
of its body's graph (execution.py). What the engine cannot run (a recursive
call receiving an array its caller computed, Python state changed by the
recursion, ...) makes it give up with one warning naming file:line and the
reason; the block's calls then take the runner's usual path.
"""
import collections
import warnings

import mxnet as mx
from mxnet import autograd

from ... import threads
from ...origin import user_stacklevel
from .unsupported import Unsupported
from ..capturing.python_state import python_state
from ..timing.speed_check import SpeedCheck
from ..capturing.weak_binding import BlockReference
from .batched_graph import DOWN, UP, Arena, BatchedGraph
from .body import trace_body
from .detection import recursive_methods
from .discovery import Miss, walk_subtree
from .compiled_walk import walker
from .execution import ArraysDiffer, GraphRunner, ShapeKeyedRunner, run_groups, run_program
from .functions import Function
from .program_cache import ProgramCache
from .schedule import schedule
from .signatures import Inconsistent, Signatures
from .structure import step_text

NOT_SERVED = object()
GROUPS, PROGRAM = "groups", "program"   # how an inference call under backend="tvm" runs
MAX_BODIES = 64      # per key: more means the signatures hold per-node values
MAX_KEYS = 4         # training modes and Python values of the block tree, most recent
ZERO_ROWS_KEPT = 64  # zero arrays that start arenas and pad gathered arrays, most recent


class RecursionEngine:
    def __init__(self, block, forward, methods, tvm):
        """`forward`: the block's converted forward, unbound."""
        self._block, self.tvm = BlockReference(block), tvm
        self.methods = methods
        self.entry = self.functions = None
        self._forward = forward
        self.signatures = collections.OrderedDict()   # key -> Signatures
        self.arenas = {}          # (function, output type, passes) -> Arena
        self.runners = {}         # BatchedGraph -> GraphRunner
        self.shape_keyed = {}     # BatchedGraph -> ShapeKeyedRunner (group by group)
        self._zero_rows = collections.OrderedDict()   # (rows, row shape, dtype) -> NDArray
        self._arena_rows = {}     # Arena -> its rows in recent calls group by group
        self.programs = ProgramCache()
        self._zeros = {}          # Arena -> its first rows
        self.gave_up = None       # why the engine no longer serves calls
        # Under backend="tvm", inference calls whose bodies run on TVM: group by
        # group on the bodies' plans, or the whole-call program (MXNet), measured.
        self.tvm_check = SpeedCheck(
            tvm.options.get("choose_by_measurement", True), challenger=GROUPS,
            incumbent=PROGRAM, labels=("group by group on the bodies' TVM plans",
                                       "whole-call program in MXNet")) if tvm else None
        self.statements = {}      # "file:line" -> fates.Fate, from the traces
        self.served = self.nodes = self.groups = self.traces = 0
        self.arrays_differed = 0  # calls walked again: an array unlike its body's

    @classmethod
    def for_block(cls, block, forward, tvm):
        """The engine for `block`, or None when nothing in it recurses."""
        methods = recursive_methods(block)
        return cls(block, forward, methods, tvm) if methods else None

    @property
    def block(self):
        return self._block()

    @property
    def serving(self):
        return self.gave_up is None

    def serve(self, args):
        """The forward's result for `args`, or NOT_SERVED after giving up (warned)."""
        try:
            self._know_functions()
            signatures = self._signatures()
            completed = self._discover(signatures, args)
            try:
                outputs, plan = self._run(completed)
            except ArraysDiffer:
                # An array the compiled walk took unchecked differs: walk the call
                # again, checking every read (it may need a body of its own).
                self.arrays_differed += 1
                completed = self._discover(signatures, args, exact=True)
                outputs, plan = self._run(completed)
        except Unsupported as error:
            self._give_up(error.reason, error.location)
            return NOT_SERVED
        self.served += 1
        self.nodes += len(completed) - 1
        self.groups += len(plan.groups)
        return completed[-1].body.output_type.structure(outputs)

    def output_type(self, args, signatures=None):
        """(The OutputType of the forward's result on `args`, the Signatures used)
        from the body of the entry's signature (the call's nodes walked, new
        signatures traced), without running the call; `signatures`: those of the
        block's Python state as an earlier call found it (call_batching.py: calls
        batched together share it). (None, None) once the engine gave up."""
        try:
            self._know_functions()
            if signatures is None:
                signatures = self._signatures()
            return self._discover(signatures, args)[-1].body.output_type, signatures
        except Unsupported as error:
            self._give_up(error.reason, error.location)
            return None, None

    def _know_functions(self):
        if self.functions is None:
            self.functions = [Function(m.owner, m.name) for m in self.methods]
            self.entry = Function(self.block, "forward", converted=self._forward)

    def _run(self, completed):
        """(The entry's outputs, the schedule) of the call's nodes."""
        plan = schedule(completed[:-1], completed[-1])
        variant, timed = self._variant(plan.key)
        if timed:
            return self.tvm_check.timed(variant, lambda: self._run_as(variant, plan)), plan
        outputs = self._run_as(variant, plan)
        if timed is False:
            self.tvm_check.record(variant, None)
        return outputs, plan

    def _variant(self, key):
        """(GROUPS or PROGRAM, whether to time the call for the TVM speed check,
        None when the check did not choose). Inference under
        backend="tvm" runs group by group until each body has its TVM plan (built
        on its first inference group); when one of them runs on TVM, calls run
        group by group or as the whole-call program, as measured (a program is an
        MXNet graph: TVM compiles each body once, never a program per key, which
        takes minutes for a deep tree)."""
        if self.tvm is None or autograd.is_recording():
            return PROGRAM, None
        runners = [self.runners[graph] for graph, _ in key]
        if any(runner.plan is None and not runner.plan_failed for runner in runners):
            return GROUPS, None
        if not any(runner.on_tvm for runner in runners):
            return PROGRAM, None
        return self.tvm_check.next_variant() or (GROUPS, None)

    def _run_as(self, variant, plan):
        # The call's small graphs and the operators between them run in one
        # serial region (threads.GraphSpan).
        with threads.GraphSpan() as span:
            span.outputs = self._run_graphs(variant, plan)
        return span.outputs

    def _run_graphs(self, variant, plan):
        program = self.programs.get(plan.key) if variant == PROGRAM else None
        if program is None:
            if self.tvm is None:
                # Training runs the exact rows (program_cache.py); a TVM plan's
                # shapes are symbolic (it runs unbucketed).
                plan.place(arena_rows=self._arena_rows, exact=autograd.is_recording())
                return run_groups(plan, self._zeros_of, self._shape_keyed, self._zero_rows_of)
            plan.place()
            return run_groups(plan, self._zeros_of, self.runners.__getitem__)
        plan.place(None if autograd.is_recording() else self.programs.capacities(program, plan))
        return run_program(program.runner, plan, self._zeros_of)

    def _signatures(self):
        key = (autograd.is_training(), python_state(self.block))
        if key not in self.signatures:
            self.signatures[key] = Signatures()
            while len(self.signatures) > MAX_KEYS:
                self.signatures.popitem(last=False)
        self.signatures.move_to_end(key)
        return self.signatures[key]

    def _discover(self, signatures, args, exact=False):
        """Every node of the call, callees first, the entry last; traces the bodies
        of new signatures. The compiled walk, or with `exact` the generic one,
        which checks every array it reads."""
        while True:
            completed, bound = [], self.entry.bind(args, None)
            try:
                if exact:
                    walk_subtree(signatures, self.entry, bound, completed)
                else:
                    walker(signatures, self.entry)(bound, completed, 0)
                return completed
            except Miss as miss:
                self._trace(signatures, miss)

    def _trace(self, signatures, miss):
        """Traces the missed node, after the nodes under it whose signatures have
        no body (a caller's signature holds what its callees return)."""
        pending, traced = [(miss.function, miss.args)], None
        while pending:
            function, args = pending[-1]
            try:
                walk_subtree(signatures, function, args, [])
                pending.pop()        # a body traced meanwhile serves it
                continue
            except Miss as missed:
                if missed.function is not function or missed.args is not args:
                    pending.append((missed.function, missed.args))
                    continue
            # By identity: arguments may be arrays, whose == compares elements.
            if traced is not None and traced[0] is function and traced[1] is args:
                raise Unsupported("a trace of %s does not match the node it was traced on"
                                  % function, function.location)
            try:
                body = trace_body(self.block, signatures, self.functions, function, args,
                                  len(signatures.bodies), function is self.entry)
            except Miss as callee:
                pending.append((callee.function, callee.args))
                continue
            self.traces += 1
            traced = (function, args)
            self._add(signatures, function, body)

    def _add(self, signatures, function, body):
        if function is not self.entry:
            for shape, _ in body.output_type.arrays:
                if shape[:1] != (1,):
                    raise Unsupported(
                        "%s returns an array of shape %s: the recursion engine keeps results as "
                        "rows, each with a leading axis of size 1" % (function, shape),
                        function.location)
        body.graph = BatchedGraph(body, UP, self._arena_for)
        body.down_graph = BatchedGraph(body, DOWN, self._arena_for) if body.down else None
        for graph in _stages(body):
            self.runners[graph] = GraphRunner(graph.symbol, graph.inputs, self.tvm,
                                              graph.symbolic_dims())
        try:
            signatures.add(function, body.signature, body)
        except Inconsistent as error:
            raise Unsupported(str(error), function.location)
        if len(signatures.bodies) > MAX_BODIES:
            varied, step, count = signatures.most_varied_step()
            raise Unsupported(
                "more than %d signatures: they hold a value that differs between nodes (%s "
                "found %d different things)" % (MAX_BODIES, step_text(varied, step), count),
                varied.location)

    def _arena_for(self, function, output_type, passes=False):
        key = (function, output_type, passes)
        if key not in self.arenas:
            self.arenas[key] = Arena(len(self.arenas), function, output_type, passes)
        return self.arenas[key]

    def _zeros_of(self, arena):
        if arena not in self._zeros:
            self._zeros[arena] = [mx.nd.zeros((1,) + shape, dtype=dtype)
                                  for shape, dtype in arena.row_shapes()]
        return self._zeros[arena]

    def _shape_keyed(self, graph):
        runner = self.shape_keyed.get(graph)
        if runner is None:
            # A graph without inputs (constants) has one form: its GraphRunner's.
            runner = self.shape_keyed[graph] = ShapeKeyedRunner(
                *graph.scattered(), self.runners[graph]) if graph.inputs else self.runners[graph]
        return runner

    def _zero_rows_of(self, rows, row_shape, dtype):
        """A read-only array of `rows` zero rows (kept: the same paddings recur)."""
        key = (rows, row_shape, dtype)
        array = self._zero_rows.get(key)
        if array is None:
            array = self._zero_rows[key] = mx.nd.zeros((rows,) + tuple(row_shape), dtype=dtype)
            while len(self._zero_rows) > ZERO_ROWS_KEPT:
                self._zero_rows.popitem(last=False)
        else:
            self._zero_rows.move_to_end(key)
        return array

    def _give_up(self, reason, location):
        self.gave_up = "%s: %s" % (location, reason)
        warnings.warn("gluon_dyn: %s: the recursion engine does not run %s.forward: %s"
                      % (location, type(self.block).__name__, reason),
                      stacklevel=user_stacklevel())

    def report(self):
        """What the engine did: its state, the recursive functions, the calls and
        nodes it served and the groups (batched calls) it ran, its whole-call
        programs (calls they ran, programs built and kept), calls group by
        group on static graphs per shapes (kept, calls on kept or new shapes),
        under backend="tvm" the measured choice between programs and
        group-by-group TVM plans, and per compiled body its signature, whether it
        batches (and its down stage), and its calls by backend when it ran group
        by group (and how many of its MXNet calls ran on one OpenMP thread,
        threads.py)."""
        bodies = [body for signatures in self.signatures.values() for body in signatures.bodies]
        return {
            "state": "serving" if self.gave_up is None else "gave up: " + self.gave_up,
            "functions": ["%s.%s (recurses at %s)" % (type(m.owner).__name__, m.name, m.location)
                          for m in self.methods],
            "calls": self.served, "nodes": self.nodes, "batched_calls": self.groups,
            "traces": self.traces, "arrays_differed": self.arrays_differed,
            "tvm_check": self.tvm_check.report() if self.tvm_check else None,
            "programs": self.programs.report(),
            "group_by_group": self._group_by_group_report(),
            "bodies": [self._body_report(body) for body in bodies]}

    def _group_by_group_report(self):
        """Calls group by group (bucketed): the static CachedOps kept over the
        graphs, and the calls they served or that met new shapes."""
        runners = [runner for runner in self.shape_keyed.values()
                   if isinstance(runner, ShapeKeyedRunner)]
        return {"kept_shapes": sum(runner.kept for runner in runners),
                "on_kept_shapes": sum(runner.on_kept_shapes for runner in runners),
                "on_new_shapes": sum(runner.on_new_shapes for runner in runners)}

    def _body_report(self, body):
        """A body's signature, whether each stage batches (a down stage when calls
        receive arrays it computes), its calls by backend when run group by group."""
        calls = collections.Counter()
        for graph in _stages(body):
            calls.update(self.runners[graph].calls)
        runner = self.runners[body.graph]
        down = body.down_graph
        return {"function": str(body.function), "signature": body.describe(),
                "returns": str(body.output_type),
                "batched": True if body.graph.batched else body.graph.not_batched,
                "down": None if down is None else {
                    "passes": len(body.down.outputs),
                    "batched": True if down.batched else down.not_batched},
                "calls": {kind: calls[kind] for kind in ("mxnet", "tvm", "one_thread")},
                "tvm": runner.plan.report() if runner.plan else None}


def _stages(body):
    return [body.graph] + ([body.down_graph] if body.down_graph is not None else [])
