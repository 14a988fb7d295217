"""Data-parallel training runs for tests/test_horovod.py.

`python tests/horovod_worker.py OUT_DIR SCENARIO...` runs as one Horovod worker
(started by trainkit.local_workers) and writes, per scenario,
OUT_DIR/SCENARIO-rank<R>.npz (final parameters, per-step losses, the error a
step raised, gluon_dyn's report). The same functions, called with no
Horovod, are the single-process references the tests compare against.

Each worker takes its contiguous share of every batch's rows; losses are sums
over samples and `trainer.step(rows on this worker)`, so Horovod's average
makes the step of one process over the whole batch.
"""
import json
import os
import sys

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

import gluon_dyn

HIDDEN = 6
ROWS = 8


class SequenceModel(gluon.Block):
    """A Python loop over time (lengths vary by batch), a `while` whose trip count
    is a tensor, and an `if` on a tensor flag; the flag and trip count are the
    same for every row of a batch, so a worker's half decides as the batch does.
    The cell infers its input size at the first call (deferred initialisation);
    layers that the first call may skip are given theirs."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.cell = gluon.rnn.LSTMCell(HIDDEN)
            self.refine = gluon.nn.Dense(HIDDEN, activation="tanh", in_units=HIDDEN)
            self.up = gluon.nn.Dense(2, in_units=HIDDEN)
            self.down = gluon.nn.Dense(2, in_units=HIDDEN)

    def forward(self, seq, steps, flag):
        rows = seq.shape[1]
        h = [mx.nd.zeros((rows, HIDDEN)), mx.nd.zeros((rows, HIDDEN))]
        for t in range(seq.shape[0]):
            out, h = self.cell(seq[t], h)
        done = mx.nd.zeros((1,))
        while done < steps:
            out = out + self.refine(out)
            done = done + 1
        if mx.nd.sum(flag) > 0:
            return self.up(out)
        return self.down(out)


class TreeModel(gluon.Block):
    """Recursion to a depth that changes from batch to batch (a Python number);
    every layer infers its input size at the first call."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.leaf = gluon.nn.Dense(HIDDEN, activation="tanh")
            self.combine = gluon.nn.Dense(HIDDEN, activation="tanh")
            self.head = gluon.nn.Dense(2)

    def node(self, x, depth):
        if depth == 0:
            return self.leaf(x)
        left, right = self.node(x, depth - 1), self.node(x * 0.5, depth - 1)
        return self.combine(mx.nd.concat(left, right, dim=1))

    def forward(self, x, depth):
        return self.head(self.node(x, depth))


class BranchModel(gluon.Block):
    """An `if` on the sum of the rows a worker holds: two workers' halves of one
    batch can take different branches."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.pos = gluon.nn.Dense(2, in_units=3)
            self.neg = gluon.nn.Dense(2, in_units=3)

    def forward(self, x):
        if mx.nd.sum(x) > 0:
            return self.pos(x)
        return self.neg(x)


def sequence_batches():
    rng = np.random.RandomState(7)
    for length, steps, flag in [(3, 0, 1), (5, 2, 0), (4, 1, 1), (3, 0, 0), (6, 2, 1),
                                (5, 1, 0), (4, 2, 0), (3, 1, 1)]:
        yield ([rng.randn(length, ROWS, 3), np.array([steps]), np.array([flag])],
               rng.randn(ROWS, 2))


def tree_batches():
    rng = np.random.RandomState(8)
    for depth in [1, 2, 1, 3, 2, 2, 1, 3]:
        yield [rng.randn(ROWS, 3), depth], rng.randn(ROWS, 2)


def branch_rows(signs):
    """A batch whose first half sums to sign[0] * something, second to sign[1]."""
    rng = np.random.RandomState(len(signs) + int(signs[0] > 0))
    half = np.abs(rng.rand(ROWS // 2, 3)) + 0.1
    return np.concatenate([signs[0] * half, signs[1] * half[::-1]])


# Per step, the sign of each half's sum: "both" steps leave `neg` stale on every
# worker (and in one process); mixed steps use `pos` on one worker, `neg` on the other.
BRANCH_SCHEDULES = {
    "mixed": [(1, -1), (-1, 1), (1, -1), (-1, 1), (1, -1), (1, -1), (-1, 1), (1, -1)],
    "with_stale": [(1, -1), (-1, 1), (1, -1), (1, 1), (1, 1), (-1, 1), (1, 1), (1, 1)],
}


def branch_batches(schedule):
    rng = np.random.RandomState(9)
    for signs in BRANCH_SCHEDULES[schedule]:
        yield [branch_rows(signs)], rng.randn(ROWS, 2)


MODELS = {"sequence": (SequenceModel, sequence_batches), "tree": (TreeModel, tree_batches)}


def share(value, rank, size):
    """This worker's contiguous share of the rows (axis 0, or axis 1 for a sequence)."""
    if not isinstance(value, np.ndarray) or value.ndim == 1 and value.shape[0] == 1:
        return value    # a per-batch value: every worker gets it whole
    axis = 1 if value.ndim == 3 else 0
    rows = value.shape[axis] // size
    return np.take(value, range(rank * rows, (rank + 1) * rows), axis=axis)


def as_argument(value):
    return mx.nd.array(value) if isinstance(value, np.ndarray) else value


def train(net, batches, trainer, rank=0, size=1, ignore_stale_grad=False):
    """Steps over `batches` on this worker's share; returns the per-step losses (of
    this share) and the message of a step that raised, if one did."""
    losses = []
    for inputs, target in batches:
        args = [as_argument(share(value, rank, size)) for value in inputs]
        target = mx.nd.array(share(target, rank, size))
        with autograd.record():
            loss = ((net(*args) - target) ** 2).sum()
        loss.backward()
        losses.append(float(loss.asscalar()))
        try:
            trainer.step(target.shape[0], ignore_stale_grad=ignore_stale_grad)
        except UserWarning as error:   # what Gluon raises for a stale gradient
            return losses, str(error)
    return losses, None


def build(model_class, dynamic, seed):
    mx.random.seed(seed)
    # A fixed prefix: parameter names (in error messages too) do not depend on how
    # many blocks the process made before.
    net = model_class(prefix=model_class.__name__.lower() + "_")
    net.initialize(mx.init.Uniform(0.5))
    if dynamic:
        net.hybridize(dynamic=True, check_speed=False)
    return net


def initial_parameters(name, seed):
    """A model's parameters once the first batch has completed deferred initialisation."""
    model_class, batches = MODELS[name]
    net = build(model_class, False, seed)
    inputs, _ = next(batches())
    net(*[as_argument(value) for value in inputs])
    return parameters(net)


def parameters(net):
    return {name: p.data().asnumpy() for name, p in net._collect_params_with_prefix().items()}


def run_model(name, dynamic, rank=0, size=1, make_trainer=None):
    """SequenceModel or TreeModel, plain SGD (branches and loops that did not run in
    a step leave their parameters' gradients stale: skipped); parameters initialised
    from a rank-dependent seed and broadcast from rank 0 once deferred
    initialisation has run."""
    model_class, batches = MODELS[name]
    net = build(model_class, dynamic, seed=100 + rank)
    params = net.collect_params()
    trainer = make_trainer(params) if make_trainer else gluon.Trainer(params, "sgd",
                                                                      {"learning_rate": 0.05})
    losses, error = train(net, batches(), trainer, rank, size, ignore_stale_grad=True)
    return net, losses, error


def run_branches(schedule, dynamic, ignore_stale_grad, rank=0, size=1, make_trainer=None):
    """BranchModel with SGD, momentum and weight decay (which move a parameter whose
    gradient is zero, but not one that is skipped as stale)."""
    net = build(BranchModel, dynamic, seed=200)
    params = net.collect_params()
    options = {"learning_rate": 0.05, "momentum": 0.9, "wd": 0.01}
    trainer = make_trainer(params, options) if make_trainer else \
        gluon.Trainer(params, "sgd", options)
    losses, error = train(net, branch_batches(schedule), trainer, rank, size, ignore_stale_grad)
    return net, losses, error


def run_branches_in_one_process(schedule, ignore_stale_grad):
    """The semantics the workers must follow: one process runs each worker's half
    as its own forward and backward, gradients added, then one step."""
    net = build(BranchModel, False, seed=200)
    params = net.collect_params()
    params.setattr("grad_req", "add")
    trainer = gluon.Trainer(params, "sgd", {"learning_rate": 0.05, "momentum": 0.9, "wd": 0.01})
    losses = []
    for (x,), target in branch_batches(schedule):
        params.zero_grad()
        total = 0.0
        for half in range(2):
            with autograd.record():
                loss = ((net(mx.nd.array(share(x, half, 2))) -
                         mx.nd.array(share(target, half, 2))) ** 2).sum()
            loss.backward()
            total += float(loss.asscalar())
        losses.append(total)
        try:
            trainer.step(ROWS, ignore_stale_grad=ignore_stale_grad)
        except UserWarning as error:
            return net, losses, str(error)
    return net, losses, None


# scenario name -> how a worker runs it
SCENARIOS = {
    "sequence_dynamic": lambda **kw: run_model("sequence", True, **kw),
    "tree_dynamic": lambda **kw: run_model("tree", True, **kw),
    "branches_imperative": lambda **kw: run_branches("with_stale", False, True, **kw),
    "branches_dynamic_mixed": lambda **kw: run_branches("mixed", True, True, **kw),
    "branches_dynamic": lambda **kw: run_branches("with_stale", True, True, **kw),
    "branches_imperative_strict": lambda **kw: run_branches("with_stale", False, False, **kw),
    "branches_dynamic_strict": lambda **kw: run_branches("with_stale", True, False, **kw),
}


def save(path, net, losses, error):
    report = gluon_dyn.hybridize.report(net) if "forward" in vars(net) else None
    np.savez(path, losses=np.array(losses), error=np.array(error or ""),
             report=np.array(json.dumps(report, default=str)),
             **{"param:" + name: value for name, value in parameters(net).items()})


def main(out_dir, scenarios):
    import horovod.mxnet as hvd
    hvd.init()
    rank, size = hvd.rank(), hvd.size()

    def distributed_trainer(params, options=None):
        hvd.broadcast_parameters(params)   # deferred: runs when each parameter initialises
        return hvd.DistributedTrainer(params, "sgd", options or {"learning_rate": 0.05})

    for name in scenarios:
        net, losses, error = SCENARIOS[name](rank=rank, size=size, make_trainer=distributed_trainer)
        save(os.path.join(out_dir, "%s-rank%d.npz" % (name, rank)), net, losses, error)
    mx.nd.waitall()
    hvd.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
