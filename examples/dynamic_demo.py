"""An unmodified imperative Gluon Block, trained with hybridize(dynamic=True), and its report.

The model is written for NDArrays: a Python loop over time, state kept on `self`
across batches, a data-dependent `while` and a branch on a tensor value. Two
copies with the same parameters train side by side, one as written and one with
`hybridize(dynamic=True)`: losses, gradients and the kept state must agree on every
step. The first steps profile, trace and time the graph against the forward as
written; then both train on fresh batches, steps interleaved, and the demo prints
the median step times. Last, the trained Block runs inference with backend="tvm".
"""
import os
import pprint
import statistics
import tempfile
import time

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

import gluon_dyn

HIDDEN, FEATURES, BATCH, LENGTHS = 64, 32, 4, (24, 32)
WARMUP_STEPS, TIMED_STEPS = 16, 30
TOLERANCE = 1e-5  # largest |imperative - dynamic| accepted, outputs and gradients


class TaggerRNN(gluon.Block):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.i2h = gluon.nn.Dense(4 * HIDDEN, in_units=FEATURES)
            self.h2h = gluon.nn.Dense(4 * HIDDEN, in_units=HIDDEN)
            self.head = gluon.nn.Dense(4, in_units=HIDDEN)
        self.state = None

    def cell(self, x, state):
        """An LSTM step written out with NDArray operations."""
        h, c = state
        gates = self.i2h(x) + self.h2h(h)
        i, f, g, o = mx.nd.split(gates, num_outputs=4, axis=1)
        c = mx.nd.sigmoid(f) * c + mx.nd.sigmoid(i) * mx.nd.tanh(g)
        h = mx.nd.sigmoid(o) * mx.nd.tanh(c)
        return h, [h, c]

    def forward(self, seq, refine_steps):
        if self.state is None:
            self.state = [mx.nd.zeros((seq.shape[1], HIDDEN)), mx.nd.zeros((seq.shape[1], HIDDEN))]
        h = [s.detach() for s in self.state]     # state carried across batches
        for t in range(seq.shape[0]):
            out, h = self.cell(seq[t], h)
        self.state = h
        steps = mx.nd.zeros((1,))
        while mx.nd.sum(steps) < mx.nd.sum(refine_steps):   # trip count from the data
            out = mx.nd.tanh(out) + out
            steps = steps + 1
        logits = self.head(out)
        if mx.nd.mean(logits) > 0:                           # a branch on a tensor
            logits = logits * 2
        return logits


def build(seed=1):
    mx.random.seed(seed)
    net = TaggerRNN()
    net.initialize(mx.init.Xavier())
    return net


def batches(count, seed):
    rng = np.random.RandomState(seed)
    return [(mx.nd.array(rng.randn(LENGTHS[i % len(LENGTHS)], BATCH, FEATURES)),
             mx.nd.array([rng.randint(0, 3)]), mx.nd.array(rng.randint(0, 4, BATCH)))
            for i in range(count)]


def train_step(net, trainer, batch):
    """One step; returns (loss, the head's gradient, seconds)."""
    seq, refine, labels = batch
    start = time.perf_counter()
    with autograd.record():
        loss = gluon.loss.SoftmaxCrossEntropyLoss()(net(seq, refine), labels).mean()
    loss.backward()
    trainer.step(1)
    mx.nd.waitall()
    return loss.asscalar(), net.head.weight.grad().asnumpy().copy(), time.perf_counter() - start


def main():
    nets = {"imperative": build(), "dynamic": build()}
    nets["dynamic"].hybridize(dynamic=True)
    trainers = {name: gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.05})
                for name, net in nets.items()}
    seconds, worst = {name: [] for name in nets}, 0.0
    # Fresh batches every step; the first WARMUP_STEPS cover profiling, tracing and
    # the speed check, the rest are timed, the two models interleaved step by step.
    for step, batch in enumerate(batches(WARMUP_STEPS + TIMED_STEPS, seed=0)):
        results = {}
        for name in (("imperative", "dynamic") if step % 2 else ("dynamic", "imperative")):
            results[name] = train_step(nets[name], trainers[name], batch)
            if step >= WARMUP_STEPS:
                seconds[name].append(results[name][2])
        (loss_a, grad_a, _), (loss_b, grad_b, _) = results["imperative"], results["dynamic"]
        worst = max(worst, abs(loss_a - loss_b), np.abs(grad_a - grad_b).max())
    state_matches = all(np.allclose(a.asnumpy(), b.asnumpy(), atol=1e-5) for a, b in
                        zip(nets["imperative"].state, nets["dynamic"].state))
    print("%d training steps on fresh batches (lengths %s, refine steps 0-2): max |imperative - "
          "dynamic| over losses and gradients = %.2e; state kept on self matches: %s"
          % (WARMUP_STEPS + TIMED_STEPS, LENGTHS, worst, state_matches))
    if worst > TOLERANCE or not state_matches:
        raise SystemExit("the dynamic copy disagrees with the imperative one")
    medians = {name: 1000 * statistics.median(times) for name, times in seconds.items()}
    print("median step over the last %d steps (interleaved): imperative %.2f ms, dynamic %.2f ms "
          "(%.1fx)" % (TIMED_STEPS, medians["imperative"], medians["dynamic"],
                       medians["imperative"] / medians["dynamic"]))
    report = gluon_dyn.hybridize.report(nets["dynamic"])
    measured = report["speed_check"]["history"][-1]["times_ms"]
    print("calls served by graphs after profiling: %d of %d; speed check: %s (graph %.2f ms, "
          "as written %.2f ms)" % (report["calls"]["graph"], report["calls"]["after_profiling"],
                                   report["speed_check"]["state"], measured["graph"],
                                   measured["python"]))
    print("report:")
    pprint.pprint(report)
    run_on_tvm(nets["dynamic"])


def run_on_tvm(trained):
    """Inference with backend="tvm": the trained Block's static graphs compiled by TVM."""
    imperative, on_tvm = build(), build()
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "tagger.params")
        trained.save_parameters(path)
        for net in (imperative, on_tvm):
            net.load_parameters(path)
    on_tvm.hybridize(dynamic=True, backend="tvm")
    worst = 0.0
    for seq, refine, _ in batches(12, seed=1):
        outputs = [net(seq, refine).asnumpy() for net in (imperative, on_tvm)]
        worst = max(worst, np.abs(outputs[0] - outputs[1]).max())
    if worst > TOLERANCE:
        raise SystemExit("backend='tvm' disagrees with the imperative Block")
    report = gluon_dyn.hybridize.report(on_tvm)
    print("\nbackend='tvm', 12 inference calls: max |imperative - tvm| = %.2e; last call on a "
          "graph: %s" % (worst, report["calls"]["last"] == "graph"))
    for plan in report["tvm"]["plans"]:
        print("plan: runs %s, segments %s" % (plan["runs"], [
            (segment["backend"], segment["ops"], {name: round(ms, 3) for name, ms in
                                                  segment["times_ms"].items()})
            for segment in plan["segments"]]))


if __name__ == "__main__":
    main()
