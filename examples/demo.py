"""gluon_dyn demo: control flow inside a hybridized Gluon block, trained, exported, re-imported.

The model reads a batch of sequences, runs a recurrent cell over time with
`foreach`, refines the final state with a data-dependent `while_loop` (parameters
in the body), and picks an output head with `cond`. It is trained for a few steps
imperatively and hybridized side by side (losses and parameters must agree), then
exported to MXNet's own format and loaded back in a process that imports only MXNet.
"""
import os
import subprocess
import sys
import tempfile
import time

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon, nd

import gluon_dyn
from gluon_dyn.ops import cond, foreach, while_loop

HIDDEN = 8


class LoopyModel(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = gluon.nn.Dense(HIDDEN, in_units=4 + HIDDEN, activation="tanh")
            self.refine = gluon.nn.Dense(HIDDEN, in_units=HIDDEN)
            self.head_pos = gluon.nn.Dense(1, in_units=HIDDEN)
            self.head_neg = gluon.nn.Dense(1, in_units=HIDDEN)

    def hybrid_forward(self, F, seq, h0, steps):
        def step(x_t, states):
            h = self.cell(F.concat(x_t, states[0], dim=1))
            return h, [h]

        outputs, (h,) = foreach(step, seq, [h0])
        _, (_, h) = while_loop(lambda i, h: i < steps,
                               lambda i, h: ([], [i + 1, F.tanh(self.refine(h)) + h]),
                               [F.zeros((1,)), h], max_iterations=8)
        return cond(F.sum(h) > 0, lambda: self.head_pos(h), lambda: self.head_neg(h)), outputs


def make_pair():
    imperative, hybrid = LoopyModel(), LoopyModel()
    imperative.initialize(mx.init.Xavier(rnd_type="gaussian", magnitude=1.5))
    hybrid.initialize()
    for (_, src), (_, dst) in zip(sorted(imperative.collect_params().items()),
                                  sorted(hybrid.collect_params().items())):
        dst.set_data(src.data().copy())
    hybrid.hybridize()
    return imperative, hybrid


def main():
    mx.random.seed(7)
    rng = np.random.RandomState(7)
    imperative, hybrid = make_pair()
    trainers = [gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.05})
                for net in (imperative, hybrid)]
    print("training imperative and hybridized copies side by side (synthetic data)")
    for it in range(6):
        seq_len = rng.randint(3, 7)
        seq = nd.array(rng.randn(seq_len, 5, 4))
        steps = nd.array([rng.randint(0, 4)])
        target = nd.array(rng.randn(5, 1))
        losses = []
        for net, trainer in zip((imperative, hybrid), trainers):
            with autograd.record():
                pred, _ = net(seq, nd.zeros((5, HIDDEN)), steps)
                loss = ((pred - target) ** 2).mean()
            loss.backward()
            trainer.step(1, ignore_stale_grad=True)  # a loop that ran 0 times leaves `refine` unused
            losses.append(loss.asscalar())
        print("  step %d: seq_len=%d refine_steps=%d  loss imperative %.6f  hybridized %.6f"
              % (it, seq_len, int(steps.asscalar()), losses[0], losses[1]))
        assert np.allclose(losses[0], losses[1], rtol=1e-5, atol=1e-6)
    for (name, a), (_, b) in zip(sorted(imperative.collect_params().items()),
                                 sorted(hybrid.collect_params().items())):
        assert np.allclose(a.data().asnumpy(), b.data().asnumpy(), rtol=1e-4, atol=1e-6), name
    print("parameters after training agree (allclose)")

    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "loopy")
        seq, steps = nd.array(rng.randn(4, 2, 4)), nd.array([2.0])
        expected = hybrid(seq, nd.zeros((2, HIDDEN)), steps)[0].asnumpy()
        hybrid.export(prefix)
        np.save(os.path.join(tmp, "seq.npy"), seq.asnumpy())
        np.save(os.path.join(tmp, "expected.npy"), expected)
        script = (
            "import sys, numpy as np, mxnet as mx\n"
            "from mxnet import gluon\n"
            "net = gluon.SymbolBlock.imports(sys.argv[1] + '-symbol.json', ['data0', 'data1', 'data2'],"
            " sys.argv[1] + '-0000.params')\n"
            "seq = mx.nd.array(np.load(sys.argv[2] + '/seq.npy'))\n"
            "out = net(seq, mx.nd.zeros((2, %d)), mx.nd.array([2.0]))[0].asnumpy()\n"
            "assert 'gluon_dyn' not in sys.modules\n"
            "print(float(np.abs(out - np.load(sys.argv[2] + '/expected.npy')).max()))\n" % HIDDEN)
        start = time.time()
        result = subprocess.run([sys.executable, "-c", script, prefix, tmp], capture_output=True,
                                text=True, check=True)
        print("exported to %s-symbol.json; re-imported in a process with only MXNet "
              "(%.1f s): max |difference| = %s" % (os.path.basename(prefix), time.time() - start,
                                                   result.stdout.strip()))
    print("demo finished")


if __name__ == "__main__":
    main()
