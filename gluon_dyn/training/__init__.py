"""The optimizer's update of a `gluon.Trainer` as a few fused MXNet calls.

`gluon_dyn.fused_updates(trainer)` (one line after the Trainer is made; works for
`hvd.DistributedTrainer` too) makes every later `trainer.step(batch_size)` apply
the update of all its parameters in a few multi-tensor operator calls instead of
MXNet's Python loop over parameters; `fused_updates(trainer, False)` switches back.
Everything else `step` does is MXNet's own and unchanged: the allreduce (Horovod's
after it), the stale-gradient check and skip, AMP's overflow skip.

The semantics are those of `trainer.step(batch_size)` as written. As Python (what
MXNet's `Updater` and optimizers compute, the states living on the Trainer)::

    def step(batch_size, ignore_stale_grad=False):
        opt.rescale_grad = trainer._scale / batch_size
        allreduce(grads)                          # kvstore, or Horovod's allreduce
        chosen = []
        for i in params_with_grad_req_not_null:   # the Trainer's order
            if not fresh[i] and not ignore_stale_grad:
                raise UserWarning("Gradient of Parameter ... has not been updated ...")
            if fresh[i]:
                chosen.append(i); fresh[i] = False
        for call in calls(chosen):  # SGD: MXNET_OPTIMIZER_AGGREGATION_SIZE indices of a
            for i in call:          # dtype a call; the others: one index a call
                count[i] = count.get(i, opt.begin_num_update) + 1
            opt.num_update = max(opt.num_update, *(count[i] for i in call))
            for i in call:          # lr_scheduler(num_update) as of this call
                lr[i] = opt.learning_rate * lr_mult[i]; wd[i] = opt.wd * wd_mult[i]
        for i in chosen:            # each parameter on its own, by the rules below
            w[i], state[i] = rule(w[i], g[i], state[i], lr[i], wd[i], count[i])

    clip(x) = x if not clip_gradient else clip(x, -clip_gradient, clip_gradient)
    SGD:     g = clip(rescale * g); m = momentum * m - lr * wd * w - lr * g; w = w + m
             (m = 0 without momentum)
    Adam:    g = clip(rescale * g + wd * w); m = b1 * m + (1 - b1) * g
             v = b2 * v + (1 - b2) * g**2
             w = w - lr * sqrt(1 - b2**t) / (1 - b1**t) * m / (sqrt(v) + eps)   # t = count[i]
    AdaGrad: g = rescale * g (clipped when clip_gradient is not None); h = h + g**2
             w = w + (g / sqrt(h + eps) + w * wd) * -lr
    RMSProp: g = clip(rescale * g + wd * w); n = (1 - g1) * g**2 + g1 * n
             w = w - lr * g / sqrt(n + eps)   (then clip_weights; centered: rmspropalex's)
    A float16 weight with multi_precision=True: the rule runs on its float32 copy
    (in the state) with the gradient cast to float32, and the weight is the copy cast.

How each runs (measured in benchmarks/fused_updates.py; update_rules.py): SGD and
Adam with MXNet's multi-tensor kernels (multi-tensor SGD, the kernels MXNet's loop
calls four parameters at a time; `_multi_adamw_update`, Adam's bias correction
folded into each tensor's learning rate and L2 weight decay into the gradients by
one multi-tensor SGD call) for tensors of up to 16384 elements, and MXNet's
single-tensor kernel for each larger one, where the multi-tensor kernels measured
slower on CPU (float16 Adam weights too, on their float32 copies as MXNet); AdaGrad,
which MXNet writes as ten NDArray operations per parameter, as one CachedOp of the
same operations over all parameters up to the step, then multi-tensor SGD calls
(adagrad_graph.py); RMSProp with MXNet's `rmsprop_update` per tensor, without the
loop's Python (MXNet has no multi-tensor RMSProp; the same formula composed over all
parameters in one graph measured 3.7x slower). SGD, AdaGrad and RMSProp equal
MXNet's loop bitwise; Adam within float32 rounding (its multi-tensor kernel orders
the moments' arithmetic differently: 3e-6 after 50 steps in
tests/test_fused_updates.py).

Other optimizers, row_sparse parameters and float16 AdaGrad/RMSProp weights
without multi_precision run MXNet's loop: `report(trainer)` says which steps ran
fused and why the others did not, and a UserWarning says it once per reason.
"""
from .fused_updater import fused_updates, measure_cores, report

__all__ = ["fused_updates", "measure_cores", "report"]
