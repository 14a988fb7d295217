"""Small-op LSTM: a plain Block looping over gluon.rnn.LSTMCell (hidden 64, batch 1, 50 steps).

Variants (benchmarks/harness.py: outputs checked against the imperative run,
fresh inputs, warm-up, interleaved, medians), inference and training:
- imperative:      the Block as written, run op by op;
- dynamic:         the same Block, net.hybridize(dynamic=True);
- hand-unrolled:   a HybridBlock that unrolls the loop by hand, hybridize(static_alloc=True);
- pytorch eager, torch.compile: the same loop over torch.nn.LSTMCell with the same
                   weights, in a process of their own, when the benchmark extra is
                   installed (`make setup`).
"""
import argparse
import contextlib

import mxnet as mx
from mxnet import gluon

import gluon_dyn
import harness
from control_flow_rnn import cell_values

HIDDEN, BATCH, STEPS, INPUT = 64, 1, 50, 64
COMPARED = ("hand-unrolled", "pytorch eager", "torch.compile")   # with dynamic, in the table


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


def torch_twin(net):
    """The torch_twins builder computing what `net` (a LoopLSTM or UnrolledLSTM)
    computes, and its arguments (the parameter values)."""
    return "build_lstm_head", cell_values(net.cell), harness.layer_values(net.head)


def variants(train, workers):
    """The variants of one mode; `workers` (a contextlib.ExitStack) closes PyTorch's."""
    mx.random.seed(0)
    nets = {"imperative": LoopLSTM(), "dynamic": LoopLSTM(), "hand-unrolled": UnrolledLSTM()}
    for net in nets.values():
        net.initialize(mx.init.Xavier())
    harness.copy_params(nets["imperative"], nets["dynamic"], nets["hand-unrolled"])
    nets["dynamic"].hybridize(dynamic=True)
    nets["hand-unrolled"].hybridize(static_alloc=True)
    result = [harness.Variant(name, harness.gluon_call(net, train)) for name, net in nets.items()]
    result += harness.torch_variants(workers, *torch_twin(nets["imperative"]), train=train)
    return result, nets["dynamic"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    rows = []
    for train in (False, True):
        with contextlib.ExitStack() as workers:
            runs, dynamic = variants(train, workers)
            timings = harness.compare(
                runs, lambda call: (harness.normal_array((STEPS, BATCH, INPUT), call),),
                args.repeats)
        ms = {name: timing.median_ms for name, timing in timings.items()}
        rows.append(["training" if train else "inference", ms["imperative"],
                     "%.2f (%s)" % (ms["dynamic"], harness.ratio(ms["imperative"], ms["dynamic"]))]
                    + ["%.2f (dynamic %s)" % (ms[name], harness.ratio(ms[name], ms["dynamic"]))
                       if name in ms else "-" for name in COMPARED])
        print("%s, dynamic block's statements: %s" % (
            rows[-1][0], gluon_dyn.hybridize.report(dynamic)["statements"]))
    harness.print_table(
        "LSTMCell loop, hidden %d, batch %d, %d steps, ms per sequence" % (HIDDEN, BATCH, STEPS),
        ["mode", "imperative", "`hybridize(dynamic=True)`",
         "hand-unrolled HybridBlock, `static_alloc=True`", "PyTorch eager", "torch.compile"],
        rows)


if __name__ == "__main__":
    main()
