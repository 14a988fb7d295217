"""MXNet's own control-flow benchmark configuration (benchmark/python/control_flow/rnn.py):
RNN, GRU and LSTM cells, hidden 512, 100 steps, batch 1 and 32, inference or
(--train) training: forward under autograd.record() and backward.

Variants (benchmarks/harness.py: outputs checked against the imperative run,
fresh inputs, warm-up, interleaved, medians):
- imperative: a plain Block looping over the cell in Python;
- dynamic:    the same Block, hybridize(dynamic=True) (recorded, the loop runs as MXNet's
              fused RNN operator: gluon_dyn/hybridize/passes/fused_cells.py);
- own cell (--train): the same Block over a subclass of the cell, which computes the same
              but is not run as the fused operator: the loop stays unrolled (its weight
              gradients stacked: stacked_weight_gradients.py);
- foreach:    a HybridBlock written by hand with F.contrib.foreach, hybridize(static_alloc=True);
- fused:      gluon.rnn.RNN/GRU/LSTM, MXNet's fused RNN operator (oneDNN), same weights;
- pytorch eager, torch.compile: the same loop over the torch.nn cell with the same
  weights, in a process of their own (`make setup`).
"""
import argparse
import contextlib

import mxnet as mx
from mxnet import gluon

import gluon_dyn  # noqa: F401  (enables hybridize(dynamic=True))
import harness

CELLS = {"rnn": gluon.rnn.RNNCell, "gru": gluon.rnn.GRUCell, "lstm": gluon.rnn.LSTMCell}
# The torch.nn cell computing what each Gluon cell computes (same gate order and layouts).
TORCH_CELLS = {gluon.rnn.RNNCell: "RNNCell", gluon.rnn.GRUCell: "GRUCell",
               gluon.rnn.LSTMCell: "LSTMCell"}
# The fused layer computing what each Gluon cell (with its default activations)
# computes over a sequence.
FUSED_LAYERS = {gluon.rnn.RNNCell: lambda hidden, inputs: gluon.rnn.RNN(
                    hidden, activation="tanh", input_size=inputs),
                gluon.rnn.GRUCell: lambda hidden, inputs: gluon.rnn.GRU(hidden, input_size=inputs),
                gluon.rnn.LSTMCell: lambda hidden, inputs: gluon.rnn.LSTM(hidden,
                                                                          input_size=inputs)}
# Subclasses of the cells: what a cell of the user's own unrolls into.
OWN_CELLS = {kind: type("Own" + cell.__name__, (cell,), {}) for kind, cell in CELLS.items()}
# Outputs of 100 steps at hidden 512 agree to this across implementations.
RTOL, ATOL = 1e-3, 1e-4


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


def cell_values(cell):
    """The Gluon `cell` as a cell argument of torch_twins' builders: its torch.nn twin's
    class name and its parameter values."""
    return (TORCH_CELLS[type(cell)],) + tuple(param.data().asnumpy() for param in (
        cell.i2h_weight, cell.h2h_weight, cell.i2h_bias, cell.h2h_bias))


def fused_layer(cell):
    """The fused layer (MXNet's RNN operator) with `cell`'s weights, its per-step
    outputs stacked as Loop's, hybridized with static_alloc and static_shape."""
    hidden, inputs = cell.h2h_weight.shape[1], cell.i2h_weight.shape[1]
    fused = FUSED_LAYERS[type(cell)](hidden, inputs)
    fused.initialize()
    for name in ("i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias"):
        getattr(fused, "l0_" + name).set_data(getattr(cell, name).data().copy())
    fused.hybridize(static_alloc=True, static_shape=True)
    return fused


def variants(kind, hidden, batch, train, workers):
    """The variants of one row; `workers` (a contextlib.ExitStack) closes PyTorch's."""
    mx.random.seed(0)
    nets = {"imperative": Loop(CELLS[kind](hidden, input_size=hidden)),
            "dynamic": Loop(CELLS[kind](hidden, input_size=hidden)),
            "foreach": Foreach(CELLS[kind](hidden, input_size=hidden), batch)}
    if train:
        nets["own cell"] = Loop(OWN_CELLS[kind](hidden, input_size=hidden))
    for net in nets.values():
        net.initialize(mx.init.Xavier())
    harness.copy_params(nets["imperative"], *[net for name, net in nets.items()
                                              if name != "imperative"])
    for name in ("dynamic", "own cell"):
        if name in nets:
            nets[name].hybridize(dynamic=True)
    nets["foreach"].hybridize(static_alloc=True)
    nets["fused"] = fused_layer(nets["imperative"].cell)
    result = [harness.Variant(name, harness.gluon_call(net, train), rtol=RTOL, atol=ATOL)
              for name, net in nets.items()]
    return result + harness.torch_variants(workers, "build_cell_loop",
                                           cell_values(nets["imperative"].cell),
                                           rtol=RTOL, atol=ATOL, train=train)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--cells", default=",".join(CELLS),
                        help="comma-separated, of %s" % ", ".join(CELLS))
    parser.add_argument("--train", action="store_true",
                        help="time forward and backward under autograd.record()")
    args = parser.parse_args()
    names = ["imperative", "dynamic"] + (["own cell"] if args.train else []) + [
        "foreach", "fused"] + (["pytorch eager", "torch.compile"]
                               if harness.torch_installed() else [])
    rows = []
    for kind in args.cells.split(","):
        for batch in (1, 32):
            with contextlib.ExitStack() as workers:
                timings = harness.compare(
                    variants(kind, args.hidden, batch, args.train, workers),
                    lambda call: (harness.normal_array((args.steps, batch, args.hidden), call),),
                    args.repeats)
            ms = {name: timing.median_ms for name, timing in timings.items()}
            rows.append(["%s, %d" % (kind.upper(), batch)] + [ms[name] for name in names] +
                        [harness.ratio(ms[name], ms["dynamic"]) for name in names
                         if name != "dynamic"] + [harness.ratio(ms[name], ms["own cell"])
                                                  for name in ("pytorch eager",)
                                                  if "own cell" in ms and name in ms])
    harness.print_table(
        "hidden %d, %d steps, %s, ms per call" % (
            args.hidden, args.steps, "training (forward and backward)" if args.train
            else "inference"),
        ["cell, batch"] + names + ["dynamic vs %s" % name for name in names
                                   if name != "dynamic"] +
        (["own cell vs pytorch eager"] if args.train and harness.torch_installed() else []),
        rows)


if __name__ == "__main__":
    main()
