"""Each optimizer's update of the parameters of one updater call in a few MXNet
operator calls.

`plan(optimizer, weights, grads)` decides once per set of arrays (fused_updater.py
keeps it) why the call cannot be fused, or which kernel calls update which
parameters; `apply(optimizer, plan, step, fusion)` runs them each step, every
parameter updated as `optimizer.update_multi_precision` would update it alone. The
formulas are in training/__init__.py.

Kernel choice, measured (benchmarks/fused_updates.py, 2 cores): MXNet's multi-tensor
kernels (multi-tensor SGD, `_multi_adamw_update`) loop over the largest tensor's
elements and test every tensor at each, several times slower per element than the
single-tensor kernels, so they pay only for small tensors, whose cost is the ~20 us
of each operator call: a tensor of more than ALONE_ELEMENTS gets its own
single-tensor kernel, the smaller ones share multi-tensor calls.
"""
import dataclasses
import math
from typing import List, Optional

import mxnet as mx
import numpy as np
from mxnet import optimizer as opt

from . import adagrad_graph

ALONE_ELEMENTS = 1 << 14   # the best of 4096, 16384 and 1M on the LeNet and LSTM LM sets
MULTI_SGD_LIMIT = 60       # MultiSGDKernelParam::N in MXNet 1.9.1
MULTI_ADAMW_LIMIT = 50     # MultiAdamKernelParam::N


@dataclasses.dataclass
class Step:
    """One updater call's arrays in the Trainer's order, and the learning rate,
    weight decay and update count MXNet's Updater gives each."""
    weights: list
    grads: list
    states: list
    lrs: List[float]
    wds: List[float]
    counts: List[int]


@dataclasses.dataclass
class Plan:
    """Why a call with these arrays runs MXNet's loop (`refusal`), or: each
    weight's dtype and whether it is float16 updated on its float32 copy
    (`precise`), by position in the call; and the positions each kernel call
    updates (one position: a single-tensor kernel)."""
    refusal: Optional[str]
    dtypes: list = dataclasses.field(default_factory=list)
    precise: List[bool] = dataclasses.field(default_factory=list)
    groups: List[List[int]] = dataclasses.field(default_factory=list)


def _groups(sizes, positions, limit):
    """`positions` in kernel calls: each large one alone, the small ones at most
    `limit` a call, largest first."""
    large = [[p] for p in positions if sizes[p] > ALONE_ELEMENTS]
    small = sorted((p for p in positions if sizes[p] <= ALONE_ELEMENTS), key=lambda p: -sizes[p])
    return large + [small[start:start + limit] for start in range(0, len(small), limit)]


def _call(fusion, operator, *args, **kwargs):
    fusion.op_calls[operator.__name__] += 1
    return operator(*args, **kwargs)


def _single(fusion, operator, precise, weight, grad, state, **kwargs):
    """operator(weight, grad, *state, out=weight, **kwargs), through
    Optimizer.update_multi_precision: a float16 weight with multi_precision is
    updated as its float32 copy (state[0]) from a float32 gradient, then cast."""
    if not precise:
        return _call(fusion, operator, weight, grad, *state, out=weight, **kwargs)
    master, state = state
    _call(fusion, operator, master, _call(fusion, mx.nd.cast, grad, dtype=np.float32), *state,
          out=master, **kwargs)
    _call(fusion, mx.nd.cast, master, dtype=weight.dtype, out=weight)


def _flat(rows):
    return [array for row in rows for array in row]


def _sgd(optimizer, plan, step, fusion):
    """MXNet's multi-tensor SGD kernels, as SGD._update_impl calls them; a large
    tensor with momentum by `sgd_mom_update`, the same formula for one tensor."""
    kwargs = {"rescale_grad": optimizer.rescale_grad}
    momentum = optimizer.momentum > 0
    if momentum:
        kwargs["momentum"] = optimizer.momentum
    if optimizer.clip_gradient:
        kwargs["clip_gradient"] = optimizer.clip_gradient
    operators = {(False, False): mx.nd.multi_sgd_update,
                 (True, False): mx.nd.multi_sgd_mom_update,
                 (False, True): mx.nd.multi_mp_sgd_update,
                 (True, True): mx.nd.multi_mp_sgd_mom_update}
    weights, grads, states = step.weights, step.grads, step.states
    for group in plan.groups:
        precise = plan.precise[group[0]]
        if len(group) == 1 and momentum and not precise:
            p = group[0]
            _call(fusion, mx.nd.sgd_mom_update, weights[p], grads[p], states[p], out=weights[p],
                  lr=step.lrs[p], wd=step.wds[p], **kwargs)
            continue
        if precise:     # state: (momentum or None, float32 weight)
            rows = [(weights[p], grads[p]) + ((states[p][0],) if momentum else ())
                    + (states[p][1],) for p in group]
        else:
            rows = [(weights[p], grads[p]) + ((states[p],) if momentum else ()) for p in group]
        _call(fusion, operators[momentum, precise], *_flat(rows),
              out=[weights[p] for p in group], num_weights=len(group),
              lrs=[step.lrs[p] for p in group], wds=[step.wds[p] for p in group], **kwargs)


def _adam(optimizer, plan, step, fusion):
    """Adam as `_multi_adamw_update` (which clips and weighs the rescaled gradient,
    with decoupled weight decay): bias correction goes into each tensor's learning
    rate, L2 weight decay into the gradient first (g + wd / rescale * w, one
    multi-tensor SGD call). A tensor alone, and float16 weights, by `adam_update` as
    MXNet: with multi_precision the multi-tensor kernel's rounding, fed back through
    the float16 casts the forward reads, drifted 2e-5 from MXNet's trajectory in 50
    steps (without, it would compute in float16 in another order)."""
    beta1, beta2, rescale = optimizer.beta1, optimizer.beta2, optimizer.rescale_grad
    kwargs = {"beta1": beta1, "beta2": beta2, "epsilon": optimizer.epsilon}
    if optimizer.clip_gradient:
        kwargs["clip_gradient"] = optimizer.clip_gradient
    lrs = [lr * (math.sqrt(1. - beta2 ** count) / (1. - beta1 ** count))
           for lr, count in zip(step.lrs, step.counts)]
    weights, grads, states, wds = step.weights, step.grads, step.states, step.wds
    for group in plan.groups:
        # multi_adamw skips its update when rescale_grad is 0 or not finite
        if len(group) == 1 or plan.dtypes[group[0]] != np.float32 \
                or not math.isfinite(rescale) or rescale == 0:
            for p in group:
                _single(fusion, mx.nd.adam_update, plan.precise[p], weights[p], grads[p],
                        states[p], lazy_update=optimizer.lazy_update, lr=lrs[p], wd=wds[p],
                        rescale_grad=rescale, **kwargs)
            continue
        decayed = [grads[p] for p in group]
        if any(wds[p] for p in group):
            decayed = [fusion.scratch(p, grads[p]) for p in group]
            _call(fusion, mx.nd.multi_sgd_update, *_flat((grads[p], weights[p]) for p in group),
                  out=decayed, num_weights=len(group), lrs=[-wds[p] / rescale for p in group],
                  wds=[0.0] * len(group), rescale_grad=1.0)
        _call(fusion, mx.nd._internal._multi_adamw_update,
              *_flat((weights[p], g) + tuple(states[p]) for p, g in zip(group, decayed)),
              fusion.scalar(rescale, weights[group[0]].context),
              out=[weights[p] for p in group], num_weights=len(group),
              lrs=[lrs[p] for p in group], wds=[0.0] * len(group),
              etas=[1.0] * len(group), **kwargs)


def _adagrad(optimizer, plan, step, fusion):
    """AdaGrad: adagrad_graph's CachedOp makes each parameter's step, then
    `weight + step * -lr` is the multi-tensor SGD kernel (weight decay 0, the same
    float32 result), float16 weights with multi_precision cast from their copies."""
    targets, steps = adagrad_graph.steps(optimizer, plan, step, fusion)
    for group in plan.groups:
        _call(fusion, mx.nd.multi_sgd_update, *_flat((targets[p], steps[p]) for p in group),
              out=[targets[p] for p in group], num_weights=len(group),
              lrs=[step.lrs[p] for p in group], wds=[0.0] * len(group), rescale_grad=1.0)
    for p, precise in enumerate(plan.precise):
        if precise:
            _call(fusion, mx.nd.cast, targets[p], dtype=plan.dtypes[p], out=step.weights[p])


def _rmsprop(optimizer, plan, step, fusion):
    """RMSProp.update per tensor: MXNet has no multi-tensor RMSProp kernel; its
    formula composed over all tensors in one graph measured 3.7x slower than a kernel
    call per tensor, and MXNet 1.9.1's single-tensor optimizer operators cannot be
    graph nodes (making their Symbol fails: "Not enough argument to call operator
    rmsprop_update")."""
    kwargs = {"gamma1": optimizer.gamma1, "epsilon": optimizer.epsilon,
              "rescale_grad": optimizer.rescale_grad}
    if optimizer.centered:
        kwargs["gamma2"] = optimizer.gamma2
    if optimizer.clip_gradient:
        kwargs["clip_gradient"] = optimizer.clip_gradient
    if optimizer.clip_weights:
        kwargs["clip_weights"] = optimizer.clip_weights
    operator = mx.nd.rmspropalex_update if optimizer.centered else mx.nd.rmsprop_update
    for p, precise in enumerate(plan.precise):
        _single(fusion, operator, precise, step.weights[p], step.grads[p], step.states[p],
                lr=step.lrs[p], wd=step.wds[p], **kwargs)


RULES = {opt.SGD: (_sgd, MULTI_SGD_LIMIT), opt.Adam: (_adam, MULTI_ADAMW_LIMIT),
         opt.AdaGrad: (_adagrad, MULTI_SGD_LIMIT), opt.RMSProp: (_rmsprop, None)}
NAMES = ", ".join(kind.__name__ for kind in RULES)
FLOAT32_STATE = (opt.AdaGrad, opt.RMSProp)   # their states are float32 whatever the weight


def _refusal(optimizer, weights, grads):
    kind = type(optimizer)
    if kind not in RULES:
        return "no fused update for optimizer %s (fused: %s)" % (kind.__name__, NAMES)
    if any(a.stype != "default" for a in list(weights) + list(grads)):
        return "row_sparse weights or gradients (MXNet's sparse updates)"
    for weight in weights:
        if weight.dtype not in (np.float32, np.float16):
            return "weights of dtype %s (fused: float32, float16)" % np.dtype(weight.dtype).name
        if kind in FLOAT32_STATE and weight.dtype == np.float16 and not optimizer.multi_precision:
            return ("%s keeps float32 states: float16 weights need multi_precision=True"
                    % kind.__name__)
    return None


def plan(optimizer, weights, grads):
    """The Plan of an updater call of `optimizer` with these arrays."""
    refusal = _refusal(optimizer, weights, grads)
    if refusal is not None:
        return Plan(refusal)
    dtypes = [w.dtype for w in weights]
    precise = [optimizer.multi_precision and dtype == np.float16 for dtype in dtypes]
    _, limit = RULES[type(optimizer)]
    if limit is None:
        return Plan(None, dtypes, precise, [list(range(len(weights)))])
    sizes = [w.size for w in weights]
    kinds = {}
    for position, key in enumerate(zip(dtypes, precise)):
        kinds.setdefault(key, []).append(position)
    return Plan(None, dtypes, precise, [group for positions in kinds.values()
                                        for group in _groups(sizes, positions, limit)])


def apply(optimizer, plan, step, fusion):
    """Update every parameter of `step` as `optimizer` does (plan.refusal is None)."""
    rule, _ = RULES[type(optimizer)]
    rule(optimizer, plan, step, fusion)
