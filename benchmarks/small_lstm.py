"""Small-op LSTM: a plain Block looping over gluon.rnn.LSTMCell (hidden 64, batch 1, 50 steps).

Variants, interleaved in one run, medians of many repeats after warm-up:
- imperative:      the Block as written, run op by op;
- dynamic:         the same Block, net.hybridize(dynamic=True);
- hand-unrolled:   a HybridBlock that unrolls the loop by hand, hybridize(static_alloc=True);
- pytorch eager:   the same loop over torch.nn.LSTMCell, for context, when the optional
                   benchmark extra is installed (`make bench-extra`).
Prints milliseconds per sequence and the ratios. Inference and training.
"""
import argparse
import statistics
import time

import mxnet as mx
from mxnet import autograd, gluon

import gluon_dyn  # noqa: F401  (enables hybridize(dynamic=True))

HIDDEN, BATCH, STEPS, INPUT = 64, 1, 50, 64


class LoopLSTM(gluon.Block):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = gluon.rnn.LSTMCell(HIDDEN, input_size=INPUT)
            self.head = gluon.nn.Dense(1, in_units=HIDDEN)

    def forward(self, seq):
        h = [mx.nd.zeros((seq.shape[1], HIDDEN)), mx.nd.zeros((seq.shape[1], HIDDEN))]
        for t in range(seq.shape[0]):
            out, h = self.cell(seq[t], h)
        return self.head(out)


class UnrolledLSTM(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = gluon.rnn.LSTMCell(HIDDEN, input_size=INPUT)
            self.head = gluon.nn.Dense(1, in_units=HIDDEN)

    def hybrid_forward(self, F, seq):
        h = [F.zeros((BATCH, HIDDEN)), F.zeros((BATCH, HIDDEN))]
        for x in F.split(seq, num_outputs=STEPS, axis=0, squeeze_axis=True):
            out, h = self.cell(x, h)
        return self.head(out)


class TorchLoop:
    """The same program in PyTorch eager (context only; never a dependency)."""

    def __init__(self, torch):
        self.torch = torch
        self.cell = torch.nn.LSTMCell(INPUT, HIDDEN)
        self.head = torch.nn.Linear(HIDDEN, 1)
        torch.set_num_threads(2)

    def __call__(self, seq):
        h = (self.torch.zeros(BATCH, HIDDEN), self.torch.zeros(BATCH, HIDDEN))
        for t in range(seq.shape[0]):
            h = self.cell(seq[t], h)
        return self.head(h[0])


def torch_step(net, seq, train):
    if train:
        net.cell.zero_grad()
        net(seq).sum().backward()
    else:
        with net.torch.no_grad():
            net(seq)


def build():
    mx.random.seed(0)
    variants = {"imperative": LoopLSTM(), "dynamic": LoopLSTM(), "hand-unrolled": UnrolledLSTM()}
    for name, net in variants.items():
        net.initialize(mx.init.Xavier())
    source = variants["imperative"].collect_params()
    for name in ("dynamic", "hand-unrolled"):
        for (_, src), (_, dst) in zip(sorted(source.items()),
                                      sorted(variants[name].collect_params().items())):
            dst.set_data(src.data())
    variants["dynamic"].hybridize(dynamic=True)
    variants["hand-unrolled"].hybridize(static_alloc=True)
    return variants


def step(net, seq, train):
    if train:
        with autograd.record():
            out = net(seq)
        out.backward()
    else:
        out = net(seq)
    out.wait_to_read()
    mx.nd.waitall()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    seq = mx.nd.random.normal(shape=(STEPS, BATCH, INPUT))
    variants = build()
    runners = {name: (lambda net: lambda train: step(net, seq, train))(net)
               for name, net in variants.items()}
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        torch_net, torch_seq = TorchLoop(torch), torch.from_numpy(seq.asnumpy())
        runners["pytorch eager"] = lambda train: torch_step(torch_net, torch_seq, train)
    for train in (False, True):
        for run in runners.values():
            for _ in range(5):
                run(train)  # warm-up: the profiled calls and the first trace
        times = {name: [] for name in runners}
        for _ in range(args.repeats):
            for name, run in runners.items():   # interleaved
                start = time.perf_counter()
                run(train)
                times[name].append((time.perf_counter() - start) * 1000)
        medians = {name: statistics.median(t) for name, t in times.items()}
        mode = "training " if train else "inference"
        line = "%s  " % mode + "  ".join("%s %.2f ms" % item for item in medians.items()) + \
            "  | dynamic vs imperative %.2fx, vs hand-unrolled %.2fx" % (
                medians["imperative"] / medians["dynamic"],
                medians["hand-unrolled"] / medians["dynamic"])
        if "pytorch eager" in medians:
            line += ", vs pytorch eager %.2fx" % (medians["pytorch eager"] / medians["dynamic"])
        print(line)
    print("report:", gluon_dyn.hybridize.report(variants["dynamic"])["statements"])


if __name__ == "__main__":
    main()
