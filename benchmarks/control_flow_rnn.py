"""MXNet's own control-flow benchmark configuration (benchmark/python/control_flow/rnn.py):
RNN, GRU and LSTM cells, hidden 512, 100 steps, batch 1 and 32, inference.

Variants, interleaved in one run, medians after warm-up:
- imperative: a plain Block looping over the cell in Python;
- dynamic:    the same Block, hybridize(dynamic=True);
- foreach:    a HybridBlock written by hand with F.contrib.foreach, hybridize(static_alloc=True).
"""
import argparse
import statistics
import time

import mxnet as mx
from mxnet import gluon

import gluon_dyn  # noqa: F401  (enables hybridize(dynamic=True))

CELLS = {"rnn": gluon.rnn.RNNCell, "gru": gluon.rnn.GRUCell, "lstm": gluon.rnn.LSTMCell}


class Loop(gluon.Block):
    def __init__(self, cell):
        super().__init__()
        with self.name_scope():
            self.cell = cell

    def forward(self, seq):
        states = self.cell.begin_state(batch_size=seq.shape[1])
        outputs = []
        for t in range(seq.shape[0]):
            out, states = self.cell(seq[t], states)
            outputs.append(out)
        return mx.nd.stack(*outputs)


class Foreach(gluon.HybridBlock):
    def __init__(self, cell, batch):
        super().__init__()
        self.batch = batch
        with self.name_scope():
            self.cell = cell

    def hybrid_forward(self, F, seq):
        states = self.cell.begin_state(batch_size=self.batch, func=F.zeros)
        outputs, _ = F.contrib.foreach(lambda x, s: self.cell(x, s), seq, states)
        return outputs


def build(kind, hidden, batch):
    mx.random.seed(0)
    nets = {"imperative": Loop(CELLS[kind](hidden, input_size=hidden)),
            "dynamic": Loop(CELLS[kind](hidden, input_size=hidden)),
            "foreach": Foreach(CELLS[kind](hidden, input_size=hidden), batch)}
    for net in nets.values():
        net.initialize(mx.init.Xavier())
    source = sorted(nets["imperative"].collect_params().items())
    for name in ("dynamic", "foreach"):
        for (_, src), (_, dst) in zip(source, sorted(nets[name].collect_params().items())):
            dst.set_data(src.data())
    nets["dynamic"].hybridize(dynamic=True)
    nets["foreach"].hybridize(static_alloc=True)
    return nets


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--hidden", type=int, default=512)
    args = parser.parse_args()
    for kind in CELLS:
        for batch in (1, 32):
            nets = build(kind, args.hidden, batch)
            seq = mx.nd.random.normal(shape=(args.steps, batch, args.hidden))
            expected = nets["imperative"](seq).asnumpy()
            for name in ("dynamic", "foreach"):
                for _ in range(4):   # profiling calls, first trace, warm-up
                    got = nets[name](seq).asnumpy()
                assert abs(got - expected).max() < 1e-4, (kind, batch, name)
            times = {name: [] for name in nets}
            for _ in range(args.repeats):
                for name, net in nets.items():
                    start = time.perf_counter()
                    net(seq).wait_to_read()
                    times[name].append((time.perf_counter() - start) * 1000)
            med = {name: statistics.median(t) for name, t in times.items()}
            print("%-4s batch %2d: imperative %7.1f ms  dynamic %7.1f ms  foreach %7.1f ms  | "
                  "dynamic vs imperative %.2fx, vs foreach %.2fx"
                  % (kind, batch, med["imperative"], med["dynamic"], med["foreach"],
                     med["imperative"] / med["dynamic"], med["foreach"] / med["dynamic"]))


if __name__ == "__main__":
    main()
