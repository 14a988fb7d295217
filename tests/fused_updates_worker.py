"""Horovod runs for tests/test_fused_updates.py.

`python tests/fused_updates_worker.py OUT_DIR` runs as one Horovod worker (started
by trainkit.local_workers): for each case it trains a small model with
`hvd.DistributedTrainer` and `gluon_dyn.fused_updates`, on its half of every batch,
and writes OUT_DIR/<case>-rank<R>.npz (final parameters, fused steps).
`train_one_process(case)` is the reference: one process, whole batches,
`trainer.step` as written. Losses are sums over rows and each worker steps with its
own row count, so Horovod's average makes the step of the whole batch.
"""
import os
import sys

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

import gluon_dyn

STEPS = 20
ROWS = 8
CASES = {
    "sgd_momentum": ("sgd", {"learning_rate": 0.05, "momentum": 0.9, "wd": 0.01}),
    "adam": ("adam", {"learning_rate": 0.01, "wd": 0.01, "clip_gradient": 1.0}),
}


def build():
    mx.random.seed(5)
    net = gluon.nn.HybridSequential(prefix="net_")
    with net.name_scope():
        net.add(gluon.nn.Dense(16, in_units=6, activation="tanh"),
                gluon.nn.Dense(8, in_units=16, activation="tanh"),
                gluon.nn.Dense(2, in_units=8))
    net.initialize(mx.init.Xavier())
    return net


def batches():
    rng = np.random.RandomState(3)
    for _ in range(STEPS):
        yield rng.uniform(-1, 1, (ROWS, 6)), rng.uniform(-1, 1, (ROWS, 2))


def train(net, trainer, rank=0, size=1):
    share = ROWS // size
    for x, y in batches():
        x, y = (mx.nd.array(a[rank * share:(rank + 1) * share]) for a in (x, y))
        with autograd.record():
            loss = ((net(x) - y) ** 2).sum()
        loss.backward()
        trainer.step(share)


def parameters(net):
    return {name: p.data().asnumpy() for name, p in net.collect_params().items()}


def train_one_process(case):
    optimizer, options = CASES[case]
    net = build()
    train(net, gluon.Trainer(net.collect_params(), optimizer, dict(options)))
    return parameters(net)


def main(out_dir):
    import horovod.mxnet as hvd
    hvd.init()
    for case, (optimizer, options) in CASES.items():
        net = build()
        params = net.collect_params()
        hvd.broadcast_parameters(params)
        trainer = gluon_dyn.fused_updates(hvd.DistributedTrainer(params, optimizer,
                                                                 dict(options)))
        train(net, trainer, hvd.rank(), hvd.size())
        np.savez(os.path.join(out_dir, "%s-rank%d.npz" % (case, hvd.rank())),
                 fused_steps=gluon_dyn.training.report(trainer)["fused_steps"],
                 **{"param:" + name: value for name, value in parameters(net).items()})
    mx.nd.waitall()
    hvd.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
