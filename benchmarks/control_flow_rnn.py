"""MXNet's own control-flow benchmark configuration (benchmark/python/control_flow/rnn.py):
RNN, GRU and LSTM cells, hidden 512, 100 steps, batch 1 and 32, inference.

Variants (benchmarks/harness.py: outputs checked against the imperative run,
fresh inputs, warm-up, interleaved, medians):
- imperative: a plain Block looping over the cell in Python;
- dynamic:    the same Block, hybridize(dynamic=True);
- foreach:    a HybridBlock written by hand with F.contrib.foreach, hybridize(static_alloc=True);
- pytorch eager: the same loop over the torch.nn cell with the same weights (`make bench-extra`).
"""
import argparse

import mxnet as mx
from mxnet import gluon

import gluon_dyn  # noqa: F401  (enables hybridize(dynamic=True))
import harness

CELLS = {"rnn": gluon.rnn.RNNCell, "gru": gluon.rnn.GRUCell, "lstm": gluon.rnn.LSTMCell}
# The torch.nn cell computing what each Gluon cell computes (same gate order and layouts).
TORCH_CELLS = {gluon.rnn.RNNCell: "RNNCell", gluon.rnn.GRUCell: "GRUCell",
               gluon.rnn.LSTMCell: "LSTMCell"}


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


def torch_cell(torch, cell):
    """The torch.nn cell computing what the Gluon `cell` computes, with its parameter values."""
    hidden, inputs = cell.h2h_weight.shape[1], cell.i2h_weight.shape[1]
    twin = getattr(torch.nn, TORCH_CELLS[type(cell)])(inputs, hidden)
    harness.torch_parameters(torch, [(twin.weight_ih, cell.i2h_weight),
                                     (twin.weight_hh, cell.h2h_weight),
                                     (twin.bias_ih, cell.i2h_bias), (twin.bias_hh, cell.h2h_bias)])
    return twin


def torch_steps(torch, twin, seq):
    """The per-step outputs of `twin` over `seq` (steps, batch, features), in a Python loop."""
    state = None
    outputs = []
    for t in range(seq.shape[0]):
        state = twin(seq[t], state)
        outputs.append(state[0] if isinstance(state, tuple) else state)
    return torch.stack(outputs)


def variants(kind, hidden, batch, torch):
    mx.random.seed(0)
    nets = {"imperative": Loop(CELLS[kind](hidden, input_size=hidden)),
            "dynamic": Loop(CELLS[kind](hidden, input_size=hidden)),
            "foreach": Foreach(CELLS[kind](hidden, input_size=hidden), batch)}
    for net in nets.values():
        net.initialize(mx.init.Xavier())
    harness.copy_params(nets["imperative"], nets["dynamic"], nets["foreach"])
    nets["dynamic"].hybridize(dynamic=True)
    nets["foreach"].hybridize(static_alloc=True)
    result = [harness.Variant(name, harness.gluon_call(net)) for name, net in nets.items()]
    if torch is not None:
        twin = torch_cell(torch, nets["imperative"].cell)
        result.append(harness.Variant(
            "pytorch eager", harness.torch_call(torch, lambda seq: torch_steps(torch, twin, seq),
                                                list(twin.parameters())),
            prepare=harness.torch_tensors(torch)))
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--hidden", type=int, default=512)
    args = parser.parse_args()
    torch = harness.import_torch()
    rows = []
    for kind in CELLS:
        for batch in (1, 32):
            timings = harness.compare(
                variants(kind, args.hidden, batch, torch),
                lambda call: (harness.normal_array((args.steps, batch, args.hidden), call),),
                args.repeats)
            ms = {name: timing.median_ms for name, timing in timings.items()}
            rows.append(["%s, %d" % (kind.upper(), batch), ms["imperative"], ms["dynamic"],
                         ms["foreach"], ms.get("pytorch eager", "-"),
                         harness.ratio(ms["imperative"], ms["dynamic"]),
                         harness.ratio(ms["foreach"], ms["dynamic"])])
    harness.print_table(
        "hidden %d, %d steps, inference, ms per call" % (args.hidden, args.steps),
        ["cell, batch", "imperative", "dynamic", "foreach", "pytorch eager",
         "dynamic vs imperative", "dynamic vs foreach"], rows)


if __name__ == "__main__":
    main()
