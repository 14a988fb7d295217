"""Partitioned execution: a graph across a data-dependent shape, and a forward with a host read.

- masked head: a plain Block scores rows (3 Dense layers), keeps the rows whose score passes
  a threshold (boolean_mask: the kept count depends on the data), runs a head (3 Dense
  layers) on the kept rows and branches on the result; the batch size changes every call
  (16 to 64 rows). The graph runs cut around the mask (gluon_dyn/hybridize/partition/cut_graph.py):
  static parts with planned memory, the mask alone, the branch by Python; under
  backend="tvm" the static parts are TVM segments with the batch and the kept rows symbolic.
- rnn with a host read: a plain Block runs an LSTMCell over 20 steps, reads a value into
  Python (`.asscalar()`) to choose what follows, then 20 more steps and a head: two graph
  segments around the read (a graph break).

Variants (benchmarks/harness.py: outputs checked against the imperative run, fresh inputs,
warm-up, interleaved, medians): imperative; hybridize(dynamic=True); hybridize(dynamic=True,
backend="tvm") for inference, both with the speed check off; PyTorch eager with the same
weights (`make setup`), in a process of its own, one thread by default (--torch-threads).
The dynamic variants' reports must show every timed call served by graphs (the run stops
otherwise).
"""
import argparse
import contextlib

import mxnet as mx
import numpy as np
from mxnet import gluon

import gluon_dyn
import harness
from control_flow_rnn import cell_values

FEATURES, HIDDEN, STEPS, BATCH = 32, 64, 20, 4


class MaskedHead(gluon.Block):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.score = gluon.nn.HybridSequential()
            self.head = gluon.nn.HybridSequential()
            for inputs, units in ((FEATURES, HIDDEN), (HIDDEN, HIDDEN), (HIDDEN, 1)):
                self.score.add(gluon.nn.Dense(units, in_units=inputs,
                                              activation="tanh" if units > 1 else None))
            for inputs, units in ((FEATURES, HIDDEN), (HIDDEN, HIDDEN), (HIDDEN, 8)):
                self.head.add(gluon.nn.Dense(units, in_units=inputs,
                                             activation="relu" if units > 8 else None))

    def forward(self, rows):
        scores = self.score(rows).reshape((-1,))
        # Detached: MXNet 1.9.1 crashes (SIGSEGV) in an imperative backward through a
        # mask whose gradient is recorded; gluon_dyn's graph never asks for it.
        kept = mx.nd.contrib.boolean_mask(rows, (scores > 0).detach())
        out = self.head(kept)
        if out.sum() > 0:
            out = out * 0.5
        return out


class ReadingRNN(gluon.Block):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = gluon.rnn.LSTMCell(HIDDEN, input_size=FEATURES)
            self.up = gluon.nn.Dense(HIDDEN, in_units=HIDDEN)
            self.down = gluon.nn.Dense(HIDDEN, in_units=HIDDEN)
            self.out = gluon.nn.Dense(4, in_units=HIDDEN)

    def forward(self, seq):
        state = [mx.nd.zeros((seq.shape[1], HIDDEN)), mx.nd.zeros((seq.shape[1], HIDDEN))]
        h = state[0]
        for t in range(STEPS):
            h, state = self.cell(seq[t], state)
        if h.mean().asscalar() > 0:          # a host read: the forward needs the value
            layer = self.up
        else:
            layer = self.down
        for t in range(STEPS, 2 * STEPS):
            h, state = self.cell(seq[t], state)
        return self.out(layer(h))


def torch_twin(net):
    """The torch_twins builder computing what `net` (a MaskedHead or ReadingRNN)
    computes, and its arguments (the parameter values)."""
    if isinstance(net, MaskedHead):
        return ("build_masked_head", [harness.layer_values(dense) for dense in net.score],
                [harness.layer_values(dense) for dense in net.head])
    return ("build_reading_rnn", cell_values(net.cell),
            *(harness.layer_values(dense) for dense in (net.up, net.down, net.out)), STEPS)


def masked_inputs(call):
    rows = 16 + (call * 7) % 49
    return (harness.normal_array((rows, FEATURES), call),)


def rnn_inputs(call):
    return (harness.normal_array((2 * STEPS, BATCH, FEATURES), call),)


def variants(model, tvm):
    mx.random.seed(0)
    nets = {"imperative": model(), "dynamic": model()}
    if tvm:
        nets["dynamic tvm"] = model()
    for net in nets.values():
        net.initialize(mx.init.Xavier())
    harness.copy_params(nets["imperative"], *[net for name, net in nets.items()
                                              if name != "imperative"])
    # The speed check off: the rows time the graphs even where the forward as written
    # is faster (the speed check would then serve it, and say so).
    nets["dynamic"].hybridize(dynamic=True, check_speed=False)
    if tvm:
        nets["dynamic tvm"].hybridize(dynamic=True, backend="tvm", check_speed=False)
    return nets


def graph_calls(report):
    """Calls the block's graphs served, its segments' included."""
    if report.get("graph_segments"):
        return min(segment["calls"]["graph"] for segment in report["graph_segments"]["segments"])
    return report["calls"]["graph"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="PyTorch's threads (default 1: these operators are small, and a "
                             "thread per core spins against MXNet's engine and other jobs)")
    args = parser.parse_args()
    rows = []
    for title, model, make_inputs in (("masked head", MaskedHead, masked_inputs),
                                      ("rnn with a host read", ReadingRNN, rnn_inputs)):
        for train in (False, True):
            nets = variants(model, tvm=not train)
            runs = [harness.Variant(name, harness.gluon_call(net, train))
                    for name, net in nets.items()]
            with contextlib.ExitStack() as workers:
                runs += harness.torch_variants(workers, *torch_twin(nets["imperative"]),
                                               names=("pytorch eager",), train=train,
                                               threads=args.torch_threads)
                timings = harness.compare(runs, make_inputs, args.repeats)
            for name, net in nets.items():
                if name == "imperative":
                    continue
                report = gluon_dyn.hybridize.report(net)
                served = graph_calls(report)
                if served < args.repeats:
                    raise SystemExit("%s, %s: graphs served %d of the %d timed calls: %s"
                                     % (title, name, served, args.repeats, report))
            ms = {name: timing.median_ms for name, timing in timings.items()}
            rows.append([title, "training" if train else "inference", "%.2f" % ms["imperative"]] +
                        ["%.2f (%s)" % (ms[name], harness.ratio(ms["imperative"], ms[name]))
                         if name in ms else "-"
                         for name in ("dynamic", "dynamic tvm", "pytorch eager")])
    harness.print_table("Partitioned execution, ms per call (ratio: imperative / variant)",
                        ["model", "mode", "imperative", "`hybridize(dynamic=True)`",
                         "`backend=\"tvm\"`", "PyTorch eager"], rows)


if __name__ == "__main__":
    main()
