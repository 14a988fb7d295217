"""What speculation costs: time to the first specialised graph, and a failed guard.

A plain Block (LSTMCell, hidden 64, batch 1, 50 steps, then a data-dependent refine
loop) runs under hybridize(dynamic=True). Per call, in order: the profiled
imperative calls, the call that traces the first graph, steady graph calls, the
call whose guard fails (graph run, then imperative), the call that traces the
relaxed graph, and steady calls of that graph. Medians over several fresh blocks.
"""
import argparse
import statistics
import time

import mxnet as mx
from mxnet import gluon

import gluon_dyn

HIDDEN, STEPS = 64, 50


class Refined(gluon.Block):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = gluon.rnn.LSTMCell(HIDDEN, input_size=HIDDEN)

    def forward(self, seq, refine):
        h = [mx.nd.zeros((1, HIDDEN)), mx.nd.zeros((1, HIDDEN))]
        for t in range(seq.shape[0]):
            out, h = self.cell(seq[t], h)
        steps = mx.nd.zeros((1,))
        while mx.nd.sum(steps) < mx.nd.sum(refine):
            out = mx.nd.tanh(out)
            steps = steps + 1
        return out


def timed(net, seq, refine):
    start = time.perf_counter()
    net(seq, mx.nd.array([refine])).wait_to_read()
    return (time.perf_counter() - start) * 1000


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--blocks", type=int, default=5)
    args = parser.parse_args()
    seq = mx.nd.random.normal(shape=(STEPS, 1, HIDDEN))
    phases = {"imperative (reference)": [], "profiled call": [], "first graph (trace)": [],
              "steady, speculated graph": [], "failed guard": [], "relaxed graph (trace)": [],
              "steady, relaxed graph": []}
    for _ in range(args.blocks):
        reference = Refined()
        reference.initialize()
        phases["imperative (reference)"].append(statistics.median(
            timed(reference, seq, 2) for _ in range(5)))
        net = Refined()
        net.initialize()
        net.hybridize(dynamic=True)
        phases["profiled call"] += [timed(net, seq, 2) for _ in range(3)]
        phases["first graph (trace)"].append(timed(net, seq, 2))
        phases["steady, speculated graph"] += [timed(net, seq, 2) for _ in range(5)]
        phases["failed guard"].append(timed(net, seq, 3))
        phases["relaxed graph (trace)"].append(timed(net, seq, 3))
        phases["steady, relaxed graph"] += [timed(net, seq, 1) for _ in range(5)]
        assert len(gluon_dyn.hybridize.report(net)["guard_failures"]) == 1
    for phase, values in phases.items():
        print("%-26s %8.2f ms" % (phase, statistics.median(values)))


if __name__ == "__main__":
    main()
