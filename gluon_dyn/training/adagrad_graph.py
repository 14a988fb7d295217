"""AdaGrad's update of all parameters: one CachedOp, then multi-tensor SGD calls.

MXNet's AdaGrad.update is about ten NDArray operations per dense parameter (MXNet
has no AdaGrad kernel for dense arrays):

    g = clip(grad * rescale); history[:] += square(g)
    weight[:] += (g / sqrt(history + eps) + weight * wd) * -lr

The same operations up to the step, for every parameter of a call, make one graph:
gradients, histories and weights in; the new histories (written over the old: each
is read only by the operation writing the new one) and the steps
`g / sqrt(history + eps) + weight * wd` out. `weight + step * -lr` is then MXNet's
multi-tensor SGD kernel with weight decay 0 (`weight + (0 - lr * step)`: the same
float32 result), one call for many parameters, so a learning rate that changes at
every step changes no graph.

The graph adds as `a - (-b)`: MXNet 1.9.1 runs `elemwise_add` inside a CachedOp as
oneDNN's sum primitive, whose OpenMP team, when the machine's CPUs are all busy,
cost ~8 ms a call (the LSTM LM's seven parameters: 112 ms against 1.6 ms with
`elemwise_sub`, MXNET_OMP_MAX_THREADS=2 on 2 loaded cores).
"""
import mxnet as mx
import numpy as np


def _symbol(layout, rescale, clip, eps, wds):
    """The graph for parameters of `layout` ((float16 with a float32 copy) each):
    inputs w<i> (the weight, or its float32 copy), g<i>, h<i> (history); outputs
    per parameter the new history and the step."""
    outputs = []
    for i, precise in enumerate(layout):
        weight, grad = mx.sym.var("w%d" % i), mx.sym.var("g%d" % i)
        if precise:
            grad = mx.sym.cast(grad, dtype=np.float32)
        grad = grad * rescale
        if clip is not None:
            grad = mx.sym.clip(grad, -clip, clip)
        # a - (-b) is a + b exactly: see the module's docstring for why not `+`
        history = mx.sym.var("h%d" % i) - mx.sym.negative(mx.sym.square(grad))
        outputs += [history, grad / mx.sym.sqrt(history + eps) - weight * -wds[i]]
    return mx.sym.Group(outputs)


def steps(optimizer, plan, step, fusion):
    """Runs the graph for the parameters of `step` (an update_rules.Step): returns
    the arrays AdaGrad steps (the weights, or their float32 copies) and the steps."""
    arrays, outputs, targets = {}, [], []
    for i, (weight, grad, state, precise) in enumerate(
            zip(step.weights, step.grads, step.states, plan.precise)):
        target, history = state if precise else (weight, state)
        arrays.update({"w%d" % i: target, "g%d" % i: grad, "h%d" % i: history})
        targets.append(target)
        outputs += [history, fusion.scratch(i, target)]
    key = (tuple(plan.precise), optimizer.rescale_grad, optimizer.clip_gradient,
           optimizer.float_stable_eps, tuple(step.wds))

    def build():
        symbol = _symbol(*key)
        return symbol.list_inputs(), mx.nd.CachedOp(symbol)
    names, graph = fusion.graph(key, build)
    fusion.op_calls["adagrad CachedOp"] += 1
    graph(*[arrays[name] for name in names], out=outputs)
    return targets, outputs[1::2]
