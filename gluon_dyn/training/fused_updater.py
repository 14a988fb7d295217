"""The switch: a Trainer's MXNet `Updater` that applies a step's update fused.

`Trainer._update` checks and marks stale gradients and then calls each context's
updater with the parameters to update; only that call changes. The Updater object
the Trainer holds stays the same object (its class is switched), so its states,
`save_states`/`load_states` (which replace `updater.optimizer`) and switching back
mid-training continue exactly where the other path left off.
"""
import collections
import warnings

import mxnet as mx
import numpy as np
from mxnet import gluon, optimizer as opt
from mxnet.optimizer.optimizer import _as_classic

from . import update_rules
from .wide_steps import WideSteps
from ..host_arrays import host_array

KEPT = 16   # plans and update graphs kept (a step skipping stale parameters has its own)


def _lru(cache, key, make):
    """cache[key], made by make() if absent; the least recently used dropped past KEPT."""
    if key in cache:
        cache.move_to_end(key)
    else:
        cache[key] = make()
        if len(cache) > KEPT:
            cache.popitem(last=False)
    return cache[key]


class Fusion:
    """What the fused updater did: steps fused, steps left to MXNet's loop (per
    reason), and the fused operator calls made (per operator); and what its calls
    reuse: plans by arrays, update graphs by layout, scratch arrays by parameter,
    the latest arrays of learning rates and the like."""

    def __init__(self, all_cores=None):
        self.wide_steps = WideSteps(all_cores)
        self.fused_steps = 0
        self.loop_steps = collections.Counter()
        self.op_calls = collections.Counter()
        self.plans = collections.OrderedDict()
        self.known_arrays = set()
        self.graphs = collections.OrderedDict()
        self.scratches = {}
        self.vectors = {}

    def plan(self, optimizer, weights, grads):
        """update_rules.plan(...), made once per optimizer kind and arrays. The
        arrays are kept with their plans, so that their ids stay theirs; arrays
        that are not among them (a parameter's data replaced, by `cast` or
        `reset_ctx`) start the plans afresh rather than keep the old ones alive."""
        ids = tuple(map(id, weights)) + tuple(map(id, grads))
        key = (type(optimizer), optimizer.multi_precision, ids)
        if key not in self.plans and not self.known_arrays.issuperset(ids):
            self.plans.clear()
            self.known_arrays = set()
        self.known_arrays.update(ids)
        return _lru(self.plans, key, lambda: (
            list(weights), list(grads), update_rules.plan(optimizer, weights, grads)))[2]

    def graph(self, key, build):
        """build(), made once per key."""
        return _lru(self.graphs, key, build)

    def scratch(self, position, like):
        """An array shaped like `like`, kept for a parameter's position."""
        array = self.scratches.get(position)
        if array is None or (array.shape, array.dtype, array.context) != (
                like.shape, like.dtype, like.context):
            array = self.scratches[position] = mx.nd.empty(like.shape, like.context, like.dtype)
        return array

    def vector(self, values, context, name):
        """`values` as a float32 array on `context`, the latest one of each `name` kept.
        A new one is made without waiting for the step's queued operators (the
        rescale of a step whose batch size varies: REINFORCE's episodes)."""
        key = (tuple(values), context)
        kept = self.vectors.get(name)
        if kept is None or kept[0] != key:
            kept = self.vectors[name] = (key, host_array(np.array(values, np.float32), context))
        return kept[1]

    def scalar(self, value, context):
        return self.vector([value], context, "scalar")

    def as_dict(self):
        return {"fused_steps": self.fused_steps, "loop_steps": dict(self.loop_steps),
                "op_calls": dict(self.op_calls)}


class FusedUpdater(opt.Updater):
    """MXNet's Updater whose call applies the update with update_rules's fused
    operators; what it cannot fuse it leaves to MXNet's own call."""

    def __call__(self, index, grad, weight):
        indices, grads, weights = _as_lists(self.optimizer, index, grad, weight)
        self._fusion.wide_steps.update_begins(grads)
        try:
            self._update(indices, grads, weights)
        finally:
            self._fusion.wide_steps.update_ends(weights)

    def _update(self, indices, grads, weights):
        plan = self._fusion.plan(self.optimizer, weights, grads)
        if plan.refusal is not None:
            if plan.refusal not in self._fusion.loop_steps:
                warnings.warn("gluon_dyn.fused_updates: MXNet's loop updates: " + plan.refusal)
            self._fusion.loop_steps[plan.refusal] += 1
            return super().__call__(indices, grads, weights)
        if weights:
            self.optimizer._set_current_context(weights[0].context.device_id)
        states = [self._state(i, w) for i, w in zip(indices, weights)]
        step = update_rules.Step(weights, grads, states, *_scheduled(
            self.optimizer, self.aggregate_updates, indices, weights))
        update_rules.apply(self.optimizer, plan, step, self._fusion)
        self._fusion.fused_steps += 1

    def _state(self, index, weight):
        """The index's optimizer state, made or moved to the weight's context as
        MXNet's Updater does."""
        if index not in self.states:
            self.states[index] = self.optimizer.create_state_multi_precision(index, weight)
            self.states_synced[index] = True
        elif not self.states_synced[index]:
            self.states[index] = self.sync_state_context(self.states[index], weight.context)
            self.states_synced[index] = True
        return self.states[index]


def _as_lists(optimizer, index, grad, weight):
    allow_np = getattr(optimizer, "allow_np_array", False)
    if not isinstance(index, (list, tuple)):
        return [index], [_as_classic(grad, allow_np)], [_as_classic(weight, allow_np)]
    return list(index), _as_classic(list(grad), allow_np), _as_classic(list(weight), allow_np)


def _scheduled(optimizer, aggregate, indices, weights):
    """(learning rates, weight decays, update counts) of `indices`, in their order,
    as MXNet's Updater makes them: each of its calls (SGD: aggregate_num indices of
    one dtype a call, dtypes in order of appearance; others: one index a call)
    counts its indices, then reads lr_scheduler(num_update) and the multipliers.
    When every index has been counted as often, the first call sets num_update for
    all: one count of all of them gives the same."""
    counts = optimizer._index_update_count
    before = {counts.get(i, optimizer.begin_num_update) for i in indices}
    if len(before) <= 1:
        calls = [list(range(len(indices)))]
    elif aggregate:
        by_dtype = collections.defaultdict(list)
        for position, weight in enumerate(weights):
            by_dtype[weight.dtype].append(position)
        size = optimizer.aggregate_num
        calls = [group[start:start + size] for group in by_dtype.values()
                 for start in range(0, len(group), size)]
    else:
        calls = [[position] for position in range(len(indices))]
    lrs, wds = [0.0] * len(indices), [0.0] * len(indices)
    for call in calls:
        called = [indices[p] for p in call]
        optimizer._update_count(called)
        for p, lr, wd in zip(call, optimizer._get_lrs(called), optimizer._get_wds(called)):
            lrs[p], wds[p] = lr, wd
    return lrs, wds, [counts[i] for i in indices]


def fused_updates(trainer, enabled=True, all_cores=None):
    """From the next `trainer.step` on, apply the optimizer's update of all
    parameters as a few fused MXNet calls (gluon_dyn/training/__init__.py states the
    semantics); `enabled=False` returns to MXNet's loop. `all_cores`: whether the
    operators of the graphs of a step run on every core (True), as MXNet runs them
    (False), or as measured faster (None; wide_steps.py). Returns the trainer."""
    if not isinstance(trainer, gluon.Trainer):
        raise TypeError("fused_updates takes a gluon.Trainer (or hvd.DistributedTrainer), "
                        "got %s" % type(trainer).__name__)
    for updater in trainer._updaters:
        if enabled:
            if not hasattr(updater, "_fusion"):
                updater._fusion = Fusion(all_cores)
            elif all_cores is not None:
                updater._fusion.wide_steps.force(all_cores)
            updater.__class__ = FusedUpdater
        elif type(updater) is FusedUpdater:
            updater._fusion.wide_steps.withdraw()
            updater.__class__ = opt.Updater
    return trainer


def measure_cores(trainer):
    """From the next `trainer.step` on, measure afresh whether its steps run faster on
    every core (wide_steps.py), as after `fused_updates(trainer)`: for steps so far
    timed among other work (a benchmark interleaving trainings) or under another
    load of the machine. A choice set with `all_cores=` is replaced by the measured one."""
    for updater in trainer._updaters:
        if type(updater) is FusedUpdater:
            updater._fusion.wide_steps.force(None)


def report(trainer):
    """What fused_updates did on `trainer`: {"enabled", "fused_steps" (updater calls
    that ran fused), "loop_steps" ({reason: calls MXNet's loop ran}), "op_calls"
    ({operator: calls}), "kvstore" (a reason no update reaches the Trainer's
    updaters, or None)}, summed over the Trainer's contexts, and "all_cores" (per
    context: whether the graphs of its steps run on every core, and why;
    wide_steps.WideSteps.report)."""
    total = {"enabled": any(type(u) is FusedUpdater for u in trainer._updaters),
             "fused_steps": 0, "loop_steps": collections.Counter(),
             "op_calls": collections.Counter(), "kvstore": None, "all_cores": []}
    for updater in trainer._updaters:
        if hasattr(updater, "_fusion"):
            done = updater._fusion.as_dict()
            total["fused_steps"] += done["fused_steps"]
            total["loop_steps"].update(done["loop_steps"])
            total["op_calls"].update(done["op_calls"])
            total["all_cores"].append(updater._fusion.wide_steps.report())
    if trainer._kvstore and trainer._update_on_kvstore:
        total["kvstore"] = ("update_on_kvstore: the kvstore runs the optimizer, "
                            "the Trainer's updaters are not called")
    total["loop_steps"], total["op_calls"] = dict(total["loop_steps"]), dict(total["op_calls"])
    return total
