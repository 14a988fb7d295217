"""What speculation costs: time to the first specialised graph, and a failed guard.

A plain Block (LSTMCell, hidden 64, batch 1, 50 steps, then a data-dependent refine
loop) runs under hybridize(dynamic=True), each call interleaved with the same call
of an imperative copy (the reference: its times and outputs) on new arrays
(benchmarks/harness.py). Per call, in order: the profiled imperative calls, the
call that traces the first graph, steady graph calls, the call whose guard fails
(graph run, then imperative), the call that traces the relaxed graph, and steady
calls of that graph. Medians over several fresh blocks.
"""
import argparse
import statistics

import mxnet as mx
from mxnet import gluon

import gluon_dyn
import harness

HIDDEN, STEPS = 64, 50
# (phase, refine loop's trip count) of each call, in order.
CALLS = ([("profiled call", 2)] * 3 + [("first graph (trace)", 2)]
         + [("steady, speculated graph", 2)] * 5 + [("failed guard", 3)]
         + [("relaxed graph (trace)", 3)] + [("steady, relaxed graph", 1)] * 5)


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


def inputs(call):
    return harness.normal_array((STEPS, 1, HIDDEN), call), mx.nd.array([CALLS[call][1]])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=5)
    args = parser.parse_args()
    phases = {"imperative (reference)": []}
    phases.update((phase, []) for phase, _ in CALLS)
    for _ in range(args.blocks):
        reference, net = Refined(), Refined()
        for block in (reference, net):
            block.initialize()
        harness.copy_params(reference, net)
        net.hybridize(dynamic=True)
        times = harness.run_calls([harness.Variant("imperative", reference),
                                   harness.Variant("dynamic", net)], inputs, len(CALLS))
        phases["imperative (reference)"] += times["imperative"]
        for (phase, _), ms in zip(CALLS, times["dynamic"]):
            phases[phase].append(ms)
        if len(gluon_dyn.hybridize.report(net)["guard_failures"]) != 1:
            raise RuntimeError("expected one failed guard, the report says %s"
                               % gluon_dyn.hybridize.report(net)["guard_failures"])
    harness.print_table(
        "LSTMCell hidden %d, %d steps, then a refine loop; medians over %d fresh blocks"
        % (HIDDEN, STEPS, args.blocks), ["call", "ms"],
        [[phase, statistics.median(values)] for phase, values in phases.items()])


if __name__ == "__main__":
    main()
