"""An unmodified imperative Gluon Block, run with hybridize(dynamic=True), and its report.

The model is written for NDArrays: a Python loop over time, state kept on `self`,
a branch on a tensor value, a data-dependent `while`. gluon_dyn converts it and
runs it as cached graphs; outputs and gradients match the imperative run. The
first three calls run imperatively to profile the tensor predicates; the first
graph assumes what they did (guarded), and the report shows the guard that
failed when the data disagreed and what was built instead. Last, the same
Block runs inference with backend="tvm" (its static graphs compiled by TVM).
"""
import pprint
import time

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

import gluon_dyn

HIDDEN = 16


class TaggerRNN(gluon.Block):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = gluon.rnn.LSTMCell(HIDDEN, input_size=8)
            self.head = gluon.nn.Dense(4, in_units=HIDDEN)
        self.state = None

    def forward(self, seq, refine_steps):
        if self.state is None:
            self.state = [mx.nd.zeros((seq.shape[1], HIDDEN)), mx.nd.zeros((seq.shape[1], HIDDEN))]
        h = self.state
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


def build(dynamic):
    mx.random.seed(1)
    net = TaggerRNN()
    net.initialize(mx.init.Xavier())
    if dynamic:
        net.hybridize(dynamic=True)
    return net


def main():
    rng = np.random.RandomState(0)
    calls = [(mx.nd.array(rng.randn(length, 2, 8)), mx.nd.array([k]))
             for length, k in [(5, 0), (7, 2), (5, 1), (7, 0)] * 3]
    nets = {"imperative": build(False), "dynamic": build(True)}
    results = {name: [] for name in nets}
    seconds = {}
    for name, net in nets.items():
        start = time.time()
        for seq, k in calls:
            with autograd.record():
                out = net(seq, k)
            out.backward()
            results[name].append((out.asnumpy(), net.head.weight.grad().asnumpy().copy()))
        seconds[name] = time.time() - start
    worst = max(np.abs(a - b).max() for (oa, ga), (ob, gb) in zip(*results.values())
                for a, b in ((oa, ob), (ga, gb)))
    print("%d calls, sequence lengths 5 and 7, refine steps 0-2: max |imperative - dynamic| "
          "over outputs and gradients = %.2e" % (len(calls), worst))
    print("state kept on self matches: %s" % all(
        np.allclose(a.asnumpy(), b.asnumpy(), atol=1e-5)
        for a, b in zip(nets["imperative"].state, nets["dynamic"].state)))
    print("wall time for all calls (the first calls profile and trace): imperative %.3f s, "
          "dynamic %.3f s"
          % (seconds["imperative"], seconds["dynamic"]))
    print("report:")
    pprint.pprint(gluon_dyn.hybridize.report(nets["dynamic"]))
    run_on_tvm(rng)


def run_on_tvm(rng):
    """Inference with backend="tvm": the same Block, its static graphs compiled by TVM."""
    nets = {"imperative": build(False), "tvm": build(False)}
    nets["tvm"].hybridize(dynamic=True, backend="tvm")
    worst = 0.0
    for length in [6] * 10:
        seq, k = mx.nd.array(rng.randn(length, 2, 8)), mx.nd.array([1])
        outputs = [net(seq, k).asnumpy() for net in nets.values()]
        worst = max(worst, np.abs(outputs[0] - outputs[1]).max())
    print("\nbackend='tvm', 10 inference calls: max |imperative - tvm| = %.2e" % worst)
    for plan in gluon_dyn.hybridize.report(nets["tvm"])["tvm"]["plans"]:
        print("plan: runs %s, segments %s" % (plan["runs"], [
            (segment["backend"], segment["ops"], {name: round(ms, 3) for name, ms in
                                                  segment["times_ms"].items()})
            for segment in plan["segments"]]))


if __name__ == "__main__":
    main()
