"""Models exported for the deployment tests (C runtime, Java binding, plan loaders), the calls
they are run on, and their outputs in Python.

Every model is a HybridBlock written with gluon_dyn.ops and Dense layers; the calls take
every branch and many lengths and trip counts, most of them never seen before the export.
"""
import os
import shutil

import mxnet as mx
import numpy as np
from mxnet import gluon

import tvm_helpers  # noqa: F401  (TVM's thread settings)
from gluon_dyn.graph_files import checksums
from gluon_dyn.ops import cond, foreach, while_loop
from tvm_bridge import compile_block

HIDDEN, FEATURES, MAX_STEPS = 5, 4, 4


class Tagger(gluon.HybridBlock):
    """An RNN over the embedded rows of `seq` (foreach), a refinement loop whose trip count is
    the data `steps` (while_loop, its per-step outputs kept), a choice between two heads on the
    result (cond). Returns the RNN's rows, the loop's rows, the final state and the head."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.embed = gluon.nn.Dense(HIDDEN, in_units=FEATURES, flatten=False)
            self.cell = gluon.nn.Dense(HIDDEN, in_units=2 * HIDDEN, activation="tanh")
            self.refine = gluon.nn.Dense(HIDDEN, in_units=HIDDEN)
            self.heads = gluon.nn.Dense(4, in_units=HIDDEN)

    def hybrid_forward(self, F, seq, steps):
        def step(row, states):
            h = self.cell(F.concat(row, states[0], dim=1))
            return h, [h]

        embedded = self.embed(seq)
        rows, (h,) = foreach(step, embedded, [F.tanh(F.mean(embedded, axis=0))])
        refined, (_, h) = while_loop(lambda i, h: i < steps,
                                     lambda i, h: (h, [i + 1, F.tanh(self.refine(h)) + h]),
                                     [F.zeros((1,)), h], max_iterations=MAX_STEPS)
        scores = self.heads(h)
        head = cond(F.sum(h) > 0, lambda: F.slice_axis(scores, axis=1, begin=0, end=2),
                    lambda: F.slice_axis(scores, axis=1, begin=2, end=4) * 2)
        return rows, refined, h, head


class Refiner(gluon.HybridBlock):
    """Dense, a while_loop (per-step outputs kept) whose trip count is the data, a cond, Dense:
    under tvm_bridge the Dense layers and the work between run on TVM, the loop and the
    branch in MXNet."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.first = gluon.nn.Dense(HIDDEN, in_units=FEATURES)
            self.pos = gluon.nn.Dense(HIDDEN, in_units=HIDDEN)
            self.neg = gluon.nn.Dense(HIDDEN, in_units=HIDDEN, activation="relu")
            self.out = gluon.nn.Dense(3, in_units=HIDDEN)

    def hybrid_forward(self, F, x, steps):
        rows, (_, h) = while_loop(lambda i, h: i < steps,
                                  lambda i, h: (h, [i + 1, F.tanh(h) * 1.5]),
                                  [F.zeros((1,)), self.first(x)], max_iterations=MAX_STEPS)
        y = cond(F.sum(h) > 0, lambda: self.pos(h), lambda: self.neg(h) * 2)
        return self.out(F.relu(y)), rows * 2


class Looper(gluon.HybridBlock):
    """The smallest model here with a data-dependent loop (per-step outputs kept) and a
    branch: the leak test runs it 10,000 times."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(3, in_units=FEATURES)

    def hybrid_forward(self, F, x, steps):
        rows, (_, h) = while_loop(lambda i, h: i < steps, lambda i, h: (h, [i + 1, h * 0.5]),
                                  [F.zeros((1,)), self.dense(x)], max_iterations=2)
        return cond(F.sum(h) > 0, lambda: h, lambda: -h), rows


class Mlp(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.hidden = gluon.nn.Dense(8, in_units=FEATURES, activation="tanh")
            self.out = gluon.nn.Dense(3, in_units=8)

    def hybrid_forward(self, F, x):
        return self.out(self.hidden(x))


def initialized(block, seed):
    mx.random.seed(seed)
    block.initialize(mx.init.Uniform(0.7))
    block.hybridize()
    return block


def tagger_calls(rng):
    """(seq, steps) over lengths 1-7, batches 1-3 and trip counts 0 to past max_iterations,
    with sequences scaled both ways so that the branch goes both ways."""
    calls = []
    for k, (length, batch, steps) in enumerate([(3, 2, 2), (1, 1, 0), (7, 3, 6), (2, 1, 4),
                                                (5, 2, 1), (4, 3, 3), (6, 1, 5), (1, 3, 0),
                                                (2, 2, 2), (3, 1, 1)]):
        scale = 3.0 if k % 2 else -3.0
        calls.append([(rng.uniform(-1, 1, (length, batch, FEATURES)) + scale).astype("f4"),
                      np.array([steps], "f4")])
    return calls


def refiner_calls(rng, batch):
    return [[(rng.uniform(-1, 1, (batch, FEATURES)) + scale).astype("f4"),
             np.array([steps], "f4")]
            for steps, scale in [(2, 2.0), (0, -2.0), (5, 2.0), (1, -2.0), (4, 2.0), (3, -2.0)]]


def python_outputs(block, calls):
    """The block's outputs on each call (imperative NDArrays in, numpy out)."""
    results = []
    with mx.autograd.pause():
        for inputs in calls:
            out = block(*[mx.nd.array(a) for a in inputs])
            results.append([o.asnumpy() for o in (out if isinstance(out, (list, tuple)) else
                                                  [out])])
    return results


def export_tagger(directory, seed=0):
    """A Tagger exported after one call; returns (block, prefix)."""
    block = initialized(Tagger(), seed)
    python_outputs(block, tagger_calls(np.random.RandomState(seed))[:1])
    prefix = str(directory / "tagger")
    block.export(prefix)
    return block, prefix


def export_plan(block, example, directory, name, cache_dir, **options):
    """`block` compiled by tvm_bridge (every TVM segment kept on TVM) on `example` and
    exported; returns (CompiledBlock, prefix)."""
    compiled = compile_block(block, *[mx.nd.array(a) for a in example], cache_dir=cache_dir,
                             choose_by_measurement=False, **options)
    prefix = str(directory / name)
    compiled.export(prefix)
    return compiled, prefix


def copy_model(prefix, directory, name):
    """A copy of the files exported under `prefix` as `directory/name` (a plan's file names
    and the checksums record follow); returns (new prefix, {suffix such as "-plan.json":
    path}). Tests damage copies: a library loaded by the process must not change under it."""
    new_prefix, base, files = str(directory / name), os.path.basename(prefix), {}
    for path in os.listdir(os.path.dirname(prefix)):
        if path.startswith(base + "-"):
            suffix = path[len(base):]
            shutil.copy(os.path.join(os.path.dirname(prefix), path), new_prefix + suffix)
            files[suffix] = new_prefix + suffix
    if "-plan.json" in files:
        with open(files["-plan.json"]) as f:
            text = f.read().replace('"%s-' % base, '"%s-' % name)
        with open(files["-plan.json"], "w") as f:
            f.write(text)
        checksums.write(new_prefix, plan=True)   # the plan changed with the names it holds
    return new_prefix, files


def assert_same(got, expected, what):
    """`got` (per call: a list of arrays, or an error message) equals `expected`."""
    assert len(got) == len(expected), what
    for k, (outputs, wanted) in enumerate(zip(got, expected)):
        assert not isinstance(outputs, str), "%s, call %d failed: %s" % (what, k, outputs)
        assert len(outputs) == len(wanted), (what, k)
        for i, (o, w) in enumerate(zip(outputs, wanted)):
            assert o.shape == w.shape, (what, k, i, o.shape, w.shape)
            np.testing.assert_allclose(o, w, rtol=1e-5, atol=1e-5,
                                       err_msg="%s, call %d, output %d" % (what, k, i))
