"""Train a model with loops, a branch and a data-dependent trip count, export it, and print its
outputs on the inputs that predict.c and Main.java use (examples/deploy/README in the main
README, "Deploying to C and Java").

    python examples/deploy/train_and_export.py build/deploy/model

The model scores a sequence of 4-feature rows: an RNN over the rows (foreach), `steps` refining
steps (while_loop; `steps` is an input, so the trip count is data), then one of two heads
depending on the refined state's sign (cond). It learns whether a sequence's mean is positive.
"""
import math
import sys

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

import gluon_dyn  # noqa: F401  (export without training-only nodes)
from gluon_dyn.ops import cond, foreach, while_loop

HIDDEN, FEATURES = 8, 4


class SequenceScorer(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.start = gluon.nn.Dense(HIDDEN, in_units=FEATURES, activation="tanh")
            self.cell = gluon.nn.Dense(HIDDEN, in_units=FEATURES + HIDDEN, activation="tanh")
            self.refine = gluon.nn.Dense(HIDDEN, in_units=HIDDEN)
            self.pos = gluon.nn.Dense(2, in_units=HIDDEN)
            self.neg = gluon.nn.Dense(2, in_units=HIDDEN)

    def hybrid_forward(self, F, seq, steps):
        def step(row, states):
            h = self.cell(F.concat(row, states[0], dim=1))
            return h, [h]

        _, (h,) = foreach(step, seq, [self.start(F.mean(seq, axis=0))])
        _, (_, h) = while_loop(lambda i, h: i < steps,
                               lambda i, h: ([], [i + 1, F.tanh(self.refine(h)) + h]),
                               [F.zeros((1,)), h], max_iterations=16)
        return cond(F.sum(h) > 0, lambda: self.pos(h), lambda: self.neg(h))


def example_inputs():
    """The inputs predict.c and Main.java build with the same formula: (seq, steps) with
    sequences of 3, 6 and 1 rows, batch 2, and 2, 0 and 5 refining steps."""
    examples = []
    for k, (length, steps) in enumerate([(3, 2), (6, 0), (1, 5)]):
        seq = np.array([[[math.sin(1.0 + k + 0.7 * t + 0.3 * f + 1.3 * b) for f in range(FEATURES)]
                         for b in range(2)] for t in range(length)], dtype=np.float32)
        examples.append((seq, np.array([steps], dtype=np.float32)))
    return examples


def train(net, rng, batches=60):
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": 0.01})
    loss = gluon.loss.SoftmaxCrossEntropyLoss()
    for _ in range(batches):
        seq = rng.uniform(-1, 1, (rng.randint(1, 8), 16, FEATURES)).astype(np.float32)
        labels = (seq.mean(axis=(0, 2)) > 0).astype(np.float32)
        steps = np.array([rng.randint(0, 4)], dtype=np.float32)
        with autograd.record():
            value = loss(net(mx.nd.array(seq), mx.nd.array(steps)), mx.nd.array(labels))
        value.backward()
        trainer.step(seq.shape[1])
    return float(value.mean().asscalar())


def main(prefix):
    mx.random.seed(0)
    net = SequenceScorer()
    net.initialize(mx.init.Xavier())
    net.hybridize()
    print("trained, last loss %.3f" % train(net, np.random.RandomState(0)))
    net.export(prefix)
    print("exported %s-symbol.json and %s-0000.params" % (prefix, prefix))
    for k, (seq, steps) in enumerate(example_inputs()):
        scores = net(mx.nd.array(seq), mx.nd.array(steps)).asnumpy()
        print("python example %d: %s" % (k, " ".join("%.5f" % v for v in scores.ravel())))


if __name__ == "__main__":
    main(sys.argv[1])
