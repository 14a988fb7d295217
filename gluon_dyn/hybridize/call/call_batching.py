"""Calls batched across a training step: `hybridize(dynamic=True, batch_calls=True)`.

A training step written per example calls the model once per tree and applies the
loss to each result:

    with autograd.record():
        losses = [loss(net(tree), label) for tree, label in batch]
        total = mx.nd.add_n(*losses)

Each call runs on the recursion engine alone, its nodes batched within one tree.
With `batch_calls=True`, a call the recursion engine serves while autograd records
returns arrays whose values are computed when first used (PendingArray), and so
does a HybridBlock (the loss) applied to such arrays: the calls made until then run
together, as one call of a block whose forward makes them in order (CallBatch), so
the recursion engine batches the nodes of every tree of the step.

A recorded call a graph serves is deferred alike (GRAPH_BATCH), when its graph
returns arrays only and has no other effect (no state kept on blocks, no argument
changed): the step's model calls and losses (a GAN's discriminator on real and on
generated images and both losses; a generator, the discriminator on its images and
the loss) run as one graph traced from the CallBatch, whose backward is one node of
autograd's tape, where each call and each loss operator was one; calls of different
blocks batching with the same options join one batch. Equivalent to::

    def call_batch(calls):          # calls: [(block, args), ...] in the order made
        results = []
        for block, args in calls:   # an argument may be an earlier call's result
            results.append(block(*args))
        return results

A batch runs (is flushed) before anything could see it run late: an array of it used
(its handle read: an operator, `asnumpy`, `backward`, `.shape`), an operator or
CachedOp writing into an existing array (`out=`, `x[:] = y`, an optimizer's update),
a copy from NumPy into an array made before the batch, a block's attributes set, a
Trainer step, a call the batch cannot take (another autograd mode, a block not served
by the recursion engine). A batch runs under the autograd mode its calls were made
in. Python data the calls read (the trees) must stay as they were until the results
are used, as for any lazily evaluated program.
"""
import collections
import functools
import threading
import warnings
import weakref

import mxnet as mx
from mxnet import autograd, gluon

from ...origin import user_stacklevel
from .call_batch import CallBatch, Callees, callee_key, flattened
from .rowwise_losses import Merger
from .served import Served
from ..capturing.weak_binding import scope_without_cycle

NOT_DEFERRED = object()
CALL_BATCHES_KEPT = 4     # per batching block: one per set of blocks a step's calls use
SIZES_KEPT = 64           # the sizes of the most recent batches, reported
# A batch of graph calls is traced per sequence of calls: a chain of them made in a
# Python loop (an RNN cell stepped per time step) would trace a graph per length.
MAX_GRAPH_BATCH_CALLS = 32
RECURSION_BATCH, GRAPH_BATCH = "recursion engine", "graphs"   # what serves a batch's calls


class _ThreadState(threading.local):
    batch = None          # the Batch collecting calls on this thread
    flushing = 0          # > 0 while a batch runs: its calls run, not deferred
    ran = None            # while a batch runs: the calls its callees made for real (CallsRan)


_state = _ThreadState()


class PendingArray(mx.nd.NDArray):
    """A result of a deferred call: an NDArray whose handle runs its batch first.
    Its shape, dtype and context, when known before the batch runs (`known`: a
    graph's results, as an earlier run of it on such arguments returned them), are
    read without running it: a later call may take it as an argument."""
    __slots__ = ("_batch", "_value", "_known", "__weakref__")

    def __new__(cls, batch=None, known=None, handle=None, writable=True):
        # MXNet makes a view of an array (reshape, a slice) as `type(array)(handle=...)`,
        # once the array is computed: a plain array.
        if handle is not None:
            return mx.nd.NDArray(handle, writable=writable)
        return super().__new__(cls)

    def __init__(self, batch, known=None):   # pylint: disable=super-init-not-called
        # NDArray's __init__ sets the handle, which a PendingArray does not have yet.
        self._batch, self._value, self._known, self.writable = batch, None, known, True

    @property
    def shape(self):
        return self._known[0] if self._known is not None else super().shape

    @property
    def dtype(self):
        return self._known[1] if self._known is not None else super().dtype

    @property
    def context(self):
        return self._known[2] if self._known is not None else super().context

    @property
    def handle(self):
        if self._value is None:
            self._batch.flush("a result used")
            if self._value is None:
                raise RuntimeError("the calls batched with this result did not run: %s"
                                   % self._batch.error)
        return self._value.handle

    def __del__(self):
        pass    # the array it stands for owns the handle


def pending_batch():
    """The batch collecting calls on this thread, when it may take more."""
    return _state.batch if not _state.flushing else None


def flush_pending(reason):
    """Run the batch collecting calls on this thread, if any (`reason`: what needs it)."""
    batch = _state.batch
    if batch is not None and not _state.flushing:
        batch.flush(reason)


class Batch:
    """Calls deferred on one thread, in order: `calls` [callee index, args, per
    argument 1 where it is an earlier result (its index among the results)],
    `callees` the distinct blocks called, `results` weak references to the
    PendingArrays in the order the calls return them."""

    def __init__(self, batcher, kind):
        self.batcher, self.kind = batcher, kind
        self.recording, self.training = autograd.is_recording(), autograd.is_training()
        self.callees, self.calls, self.results = [], [], []
        self.counts = []       # per call: how many results it returns
        self.types = []        # per result: its expected (shape, dtype), or None
        self.positions = {}    # id of a PendingArray -> its index among the results
        self.runners = []      # the runner of each deferred call of a dynamic block
        self.signatures = {}   # runner -> the Signatures its calls' walks used
        self.fresh = set()     # handles of arrays made while the batch collects
        self._trees = None     # (callees counted, ids of the blocks in their trees)
        self.done, self.error = False, None

    def matches_autograd(self):
        return (self.recording, self.training) == (autograd.is_recording(),
                                                   autograd.is_training())

    def calls_into(self, block):
        """Whether `block` is one of the callees or below one."""
        if self._trees is None or self._trees[0] != len(self.callees):
            found, stack = set(), list(self.callees)
            while stack:
                node = stack.pop()
                if id(node) not in found:
                    found.add(id(node))
                    stack.extend(node._children.values())  # pylint: disable=protected-access
            self._trees = (len(self.callees), found)
        return id(block) in self._trees[1]

    def takes(self, batcher, kind):
        """Whether a call of `kind` from a block batching with `batcher` may join:
        graph calls join from any block batching with the same options (the batch
        runs as its first block's CallBatch), recursion engine calls from its block."""
        return self.kind == kind and self.matches_autograd() and (
            self.batcher is batcher or
            (kind == GRAPH_BATCH and self.batcher.options == batcher.options))

    def add(self, block, args, output_type, known=None, expected=False):
        """Defer `block(*args)`; returns its result, made of PendingArrays (`known`:
        each one's (shape, dtype, context), if known; `expected`: whether
        `output_type`'s shapes are those of this call, as the recursion engine's
        are, which rowwise_losses.py may merge by)."""
        if block not in self.callees:
            self.callees.append(block)
        arguments, earlier = [], []
        for arg in args:
            ours = isinstance(arg, PendingArray) and arg._batch is self
            if ours:
                arg = self.positions[id(arg)]
            elif isinstance(arg, PendingArray):
                arg = arg._value
            arguments.append(arg)
            earlier.append(int(ours))
        self.calls.append([self.callees.index(block), arguments, earlier])
        pending = [PendingArray(self, None if known is None else known[k])
                   for k in range(len(output_type.arrays))]
        for value in pending:
            self.positions[id(value)] = len(self.results)
            self.results.append(weakref.ref(value))
        self.counts.append(len(pending))
        self.types.extend(known[k][:2] if known is not None else
                          output_type.arrays[k] if expected else None
                          for k in range(len(pending)))
        self.batcher.deferred += 1
        return output_type.structure(pending)

    def flush(self, reason):
        """Run the calls (once) under the autograd mode they were made in."""
        if self.done:
            return
        self.done = True
        if _state.batch is self:
            _state.batch = None
        self.batcher.flushed_by[reason] += 1
        _state.flushing += 1
        ran, _state.ran = _state.ran, CallsRan()
        try:
            scope = autograd.record if self.recording else autograd.pause
            with scope(train_mode=self.training):
                try:
                    outputs = self.batcher.run(self)
                except Exception as error:  # noqa: BLE001 - sorted out as the calls run
                    if error is _state.ran.raised:
                        raise       # a call's own error (the program's), from its line
                    outputs = self._as_written(error, _state.ran)
        except Exception as error:
            self.error = "%s: %s" % (type(error).__name__, error)
            raise
        finally:
            _state.flushing -= 1
            _state.ran = ran
        if len(outputs) != len(self.results):
            raise AssertionError("a call batch returned %d arrays for %d results"
                                 % (len(outputs), len(self.results)))
        for ref, value in zip(self.results, outputs):
            pending = ref()
            if pending is not None:
                pending._value = value
        # Its results may outlive it: what the calls held goes now.
        self.callees = self.calls = self.results = self.positions = self.runners = None
        self.counts = self.types = None
        self.signatures = self.fresh = self._trees = None


    def _as_written(self, error, ran):
        """The calls' outputs, each call made as written after the batch failed with
        `error` (a call that ran already, `ran`, is not made twice: its result is
        taken): if a call raises, that is the program's error, raised from its
        line; if none does, gluon_dyn failed: said once, and the block's calls are
        no longer batched."""
        outputs = CallBatch.forward(Callees([functools.partial(ran.result, callee)
                                             for callee in self.callees]), self.calls)
        self.batcher.give_up("%s: %s" % (type(error).__name__, error))
        return outputs


class CallsRan:
    """The calls of batching blocks made for real (not traced) while a batch runs:
    their results, in order, and the error of one that raised. A batch that fails
    after some of its calls ran (its graph's guard failed, so they ran as written,
    with Python effects its graph did not have) takes their results rather than
    making them twice; one that fails with a call's own error raises it."""

    def __init__(self):
        self.calls = []      # [block, args, result], a result taken once
        self.raised = None

    def note(self, block, args, call):
        """`call(args)`, the call of `block` on `args` a runner serves, noted."""
        try:
            result = call(args)
        except Exception as error:
            self.raised = error
            raise
        self.calls.append([block, args, result])
        return result

    def result(self, block, *args):
        """The result of `block(*args)`: a noted call's, taken, or the call made now."""
        for index, (ran_block, ran_args, result) in enumerate(self.calls):
            if ran_block is block and len(ran_args) == len(args) and \
                    all(ran is arg for ran, arg in zip(ran_args, args)):
                del self.calls[index]
                return result
        return block(*args)


def calls_ran():
    """The CallsRan of the batch running on this thread, or None."""
    return _state.ran


class Batcher:
    """The calls of one block hybridized with batch_calls=True: defers them and runs
    each batch as a call of a CallBatch (one per set of callees, most recent kept:
    callee_key), served by a `runner_class` (BlockRunner) with the block's options."""

    def __init__(self, options, runner_class):
        install_hooks()
        self.options, self.runner_class = options, runner_class
        self._call_batches = collections.OrderedDict()   # callee ids -> CallBatch
        self.deferred = self.batches = 0
        self.merger = Merger()
        self.merged_calls = 0    # loss calls run in a call on many calls' rows
        self.gave_up = None      # why calls are no longer batched
        self.graphs_gave_up = None   # why graph calls are no longer batched
        self.batch_sizes = collections.deque(maxlen=SIZES_KEPT)   # calls per batch, recent
        self.flushed_by = collections.Counter()
        self.run_at_once = collections.Counter()   # why recorded graph calls were not deferred

    def defer(self, runner, args):
        """`runner`'s block called on `args`, deferred into this thread's batch; or
        NOT_DEFERRED: the call runs now (after the batch, if it cannot join it)."""
        if _state.flushing or self.gave_up or not autograd.is_recording():
            return NOT_DEFERRED
        kind = runner.batch_kind()
        if kind is None or (kind == GRAPH_BATCH and self.graphs_gave_up):
            return NOT_DEFERRED
        if mx.util.is_np_array() or _holds_nested_pending(args):
            flush_pending("a call the batch cannot take")
            return NOT_DEFERRED
        batch = _state.batch
        if batch is not None and not batch.takes(self, kind):
            batch.flush("a call the batch cannot take")
        elif batch is not None and kind == GRAPH_BATCH and \
                len(batch.calls) >= MAX_GRAPH_BATCH_CALLS:
            batch.flush("%d calls batched" % MAX_GRAPH_BATCH_CALLS)
        batch = _state.batch
        try:
            # The block's Python state stays as the batch's first call found it: a
            # change to a block runs the batch (install_hooks).
            if kind == RECURSION_BATCH:
                known = None
                output_type, signatures = runner.recursion.output_type(
                    args, batch.signatures.get(runner) if batch is not None else None)
            else:
                (output_type, known), signatures = runner.graph_output_type(args), None
        except Exception as error:  # noqa: BLE001 - the call runs as usual, which reports it
            output_type, known = None, "%s: %s" % (type(error).__name__, error)
        if output_type is None:
            if kind == GRAPH_BATCH:
                self.run_at_once[known] += 1
            flush_pending("a call the batch cannot take")
            return NOT_DEFERRED
        batch = _state.batch     # walking the call may have run the batch (a result read)
        if batch is None:
            batch = _state.batch = Batch(self, kind)
        batch.signatures.setdefault(runner, signatures)
        batch.runners.append(runner)
        return batch.add(runner.block, args, output_type, known,
                         expected=kind == RECURSION_BATCH)

    def run(self, batch):
        """The outputs of `batch`'s calls, flattened in order."""
        self.batches += 1
        self.batch_sizes.append(len(batch.calls))
        if batch.kind == GRAPH_BATCH and len(batch.calls) == 1:
            # One graph call alone: its own graph serves it, as it would have.
            (callee, args, _), = batch.calls
            return flattened(batch.callees[callee](*args))
        merge = self.merger.merge(batch.callees, batch.calls, batch.counts, batch.types)
        callees, calls = (batch.callees, batch.calls) if merge is None else \
            (merge.callees, merge.calls)
        key = (batch.kind,) + tuple(callee_key(callee) for callee in callees)
        call_batch = self._call_batches.get(key)
        if call_batch is None:
            call_batch = self._call_batches[key] = self._new_call_batch(callees, batch.kind)
            while len(self._call_batches) > CALL_BATCHES_KEPT:
                self._call_batches.popitem(last=False)
        self._call_batches.move_to_end(key)
        with call_batch.holding(callees):
            outputs = call_batch(calls)
        if merge is not None:
            outputs = merge.check(outputs)
            self.merged_calls += merge.merged
        # Run as written (profiled, or not served), the calls counted themselves.
        runner = call_batch.forward
        if runner.calls.last in (Served.RECURSION, Served.GRAPH):
            for callee_runner in batch.runners:
                callee_runner.calls.note(Served.BATCHED)
        elif runner.fallback is not None and batch.kind == GRAPH_BATCH:
            # Said once by the CallBatch's runner; each call serves itself again.
            for callee_runner in batch.runners:
                callee_runner.batcher.graphs_gave_up = runner.fallback
        return outputs

    def give_up(self, reason):
        self.gave_up = reason
        warnings.warn("gluon_dyn: calls are no longer batched (batch_calls=True): an internal "
                      "error stopped a batch (%s); please report it" % reason,
                      stacklevel=user_stacklevel())

    def _new_call_batch(self, callees, kind):
        call_batch = CallBatch()
        scope_without_cycle(call_batch)
        with call_batch.holding(callees):
            call_batch.forward = self.runner_class(
                call_batch, recursion_only=kind == RECURSION_BATCH, **self.options)
        return call_batch

    def report(self):
        """Calls deferred, batches run, the calls of recent batches, what made
        batches run, why recorded graph calls ran at once (by reason), and how each
        CallBatch's calls were served and how many graphs each traced."""
        return {"deferred_calls": self.deferred, "batches": self.batches,
                "gave_up": self.gave_up, "graphs_gave_up": self.graphs_gave_up,
                "graph_calls_run_at_once": dict(self.run_at_once),
                "batch_sizes": list(self.batch_sizes), "flushed_by": dict(self.flushed_by),
                "loss_calls_merged": self.merged_calls,
                "call_batches": [call_batch.forward.report()["calls"]["by_kind"]
                                 for call_batch in self._call_batches.values()],
                "call_batch_traces": [call_batch.forward.tracer.traces
                                      for call_batch in self._call_batches.values()]}


def _holds_nested_pending(args):
    """Whether a PendingArray sits inside a list or tuple argument (a call refers
    to earlier results only as positional arguments)."""
    def nested(value):
        if isinstance(value, (list, tuple)):
            return any(isinstance(item, PendingArray) or nested(item) for item in value)
        return False
    return any(nested(arg) for arg in args)


# HybridBlocks applied to pending results (a loss) ----------------------------------------

_layouts = weakref.WeakKeyDictionary()   # HybridBlock -> {argument count: OutputType or None}


def defer_block_call(block, args):
    """`block(*args)` deferred into this thread's batch when `block` is a HybridBlock
    (not hybridized with dynamic=True, no hooks) taking an array of the batch;
    else NOT_DEFERRED."""
    batch = pending_batch()
    if batch is None or not isinstance(block, gluon.HybridBlock) or \
            "forward" in vars(block) or block._forward_hooks or block._forward_pre_hooks:
        return NOT_DEFERRED
    if not any(isinstance(arg, PendingArray) and arg._batch is batch for arg in args):
        return NOT_DEFERRED
    output_type = None
    if batch.matches_autograd() and all(isinstance(arg, mx.nd.NDArray) for arg in args) \
            and type(args[0]) in (PendingArray, mx.nd.NDArray):
        output_type = _output_type(block, len(args))
    if output_type is None:
        batch.flush("a call the batch cannot take")
        return NOT_DEFERRED
    return batch.add(block, args, output_type)


def _output_type(block, count):
    """The OutputType of `block` called on `count` arrays (its graph's outputs, from
    one symbolic call), or None when it cannot be told."""
    from ..recursion.output_type import flatten, output_type
    known = _layouts.setdefault(block, {})
    if count not in known:
        try:
            symbols = block.forward(*[mx.sym.var("gluon_dyn_batched%d" % k)
                                      for k in range(count)])
            layout, outputs = flatten(symbols, type(block).__name__)
            known[count] = output_type(layout, [((), None)] * len(outputs))
        except Exception:  # noqa: BLE001 - not batched: the call runs as written
            known[count] = None
    return known[count]


def note_new_array(handle):
    """An array made while a batch collects: copying into it needs no flush."""
    batch = pending_batch()
    if batch is not None:
        batch.fresh.add(handle.value)


def writes_existing(array):
    """Before a copy from NumPy into `array`: run the batch unless `array` is new."""
    batch = pending_batch()
    if batch is not None and array.handle.value not in batch.fresh:
        batch.flush("an array written")


# MXNet's ways of writing arrays and changing blocks, wrapped ---------------------------

_HOOKED = "__gluon_dyn_batch_hook__"


def install_hooks():
    """Wrap, once per process, what must run a batch first (module doc), when the
    first block batches calls: until then MXNet's functions run unwrapped."""
    for owner, name, wrapper in (
            [(block_class, name, changing_block)
             for block_class in (gluon.Block, gluon.HybridBlock)
             for name in ("__setattr__", "__delattr__", "register_child")]
            + [(gluon.Trainer, name, flushing_before("a trainer step"))
               for name in ("step", "update", "allreduce_grads")]
            + [(gluon.Block, "__call__", calling_blocks),
               (mx.ndarray.register, "_imperative_invoke", invoking),
               (mx.nd.CachedOp, "__call__", calling_cached_op),
               (mx.nd.NDArray, "_sync_copyfrom", copying_from_numpy),
               (mx.ndarray.ndarray, "_new_alloc_handle", allocating)]):
        original = getattr(owner, name)
        if not getattr(original, _HOOKED, False):
            wrapped = wrapper(original)
            setattr(wrapped, _HOOKED, True)
            setattr(owner, name, wrapped)


def flushing_before(reason):
    """A method wrapper: the collecting batch runs first (it could see the change)."""
    def wrapper(method):
        @functools.wraps(method)
        def run(*args, **kwargs):
            flush_pending(reason)
            return method(*args, **kwargs)
        return run
    return wrapper


def changing_block(method):
    """A Block method changing its attributes or children: the collecting batch runs
    first if the block is in a tree it calls (a block made meanwhile, a loss made
    anew at each step, cannot be seen by its calls)."""
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        batch = pending_batch()
        if batch is not None and batch.calls_into(self):
            batch.flush("a block changed")
        return method(self, *args, **kwargs)
    return run


def invoking(invoke):
    """MXNet's `_imperative_invoke`: an operator writing into existing arrays (`out`),
    or any operator after graph calls (flush_graph_calls)."""
    @functools.wraps(invoke)
    def run(handle, ndargs, keys, vals, out, *rest):
        if out is not None:
            flush_pending("an array written")
        else:
            flush_graph_calls()
        return invoke(handle, ndargs, keys, vals, out, *rest)
    return run


def calling_cached_op(call):
    """`CachedOp.__call__`: a graph writing into existing arrays (`out=`), or any
    graph after graph calls (flush_graph_calls)."""
    @functools.wraps(call)
    def run(self, *args, **kwargs):
        if kwargs.get("out") is not None:
            flush_pending("an array written")
        else:
            flush_graph_calls()
        return call(self, *args, **kwargs)
    return run


def flush_graph_calls():
    """A batch of graph calls runs before any other operator or graph: MXNet then
    runs them in the order the program made them, its random draws (dropout, a
    sampled noise) included, as imperatively."""
    batch = _state.batch
    if batch is not None and batch.kind == GRAPH_BATCH and not _state.flushing:
        batch.flush("an operator run")


def copying_from_numpy(copy):
    """`NDArray._sync_copyfrom`: a copy from NumPy into an array made before the batch."""
    @functools.wraps(copy)
    def run(self, source_array):
        writes_existing(self)
        return copy(self, source_array)
    return run


def allocating(allocate):
    """MXNet's `_new_alloc_handle`: notes arrays made while a batch collects."""
    @functools.wraps(allocate)
    def run(*args, **kwargs):
        handle = allocate(*args, **kwargs)
        note_new_array(handle)
        return handle
    return run


def calling_blocks(call):
    """`Block.__call__`: a HybridBlock applied to a batch's results joins the batch."""
    @functools.wraps(call)
    def run(self, *args):
        if _state.batch is not None:
            deferred = defer_block_call(self, args)
            if deferred is not NOT_DEFERRED:
                return deferred
        return call(self, *args)
    return run
