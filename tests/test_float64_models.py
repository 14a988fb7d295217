"""A model in float64 runs on graphs as it does in float32: the graphs' own bookkeeping
(a loop's step counter, a branch's predicate, a Python number a loop or branch
carries) is float32, and where it met the model's arrays, MXNet's type checks failed
the graph, and the block ran as written ("a graph failed where the forward as written
runs")."""
import mxnet as mx
import numpy as np
import pytest

from idiom_twins import on_graphs, same_as_written


class DenseModel(mx.gluon.Block):
    """A Block with one Dense child; subclasses write the forward."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = mx.gluon.nn.Dense(3, in_units=3)


class BranchAndCollect(DenseModel):
    """An `if` on a tensor, and a `while` on a tensor keeping each step's output."""

    def forward(self, x, steps):
        h = self.dense(x)
        if h.sum() > 0:
            h = h * 2
        else:
            h = h - 1
        i = mx.nd.zeros((1,), dtype=x.dtype)
        outputs = [h]
        while i.sum() < steps.sum():
            h = mx.nd.tanh(h)
            outputs.append(h)
            i = i + 1
        return h, mx.nd.stack(*outputs)


class CountedSteps(DenseModel):
    """A Python int counting a `while` on a tensor's steps, compared with a tensor and
    multiplying one (it takes their dtype imperatively)."""

    def forward(self, x, steps):
        h, n = self.dense(x), 0
        while n < steps.sum():
            h = mx.nd.tanh(h)
            n += 1
        return h * n


class ScaledByABranch(DenseModel):
    """A Python float a branch on a tensor sets, scaling a tensor, and a float a loop
    on a tensor grows."""

    def forward(self, x, steps):
        h, scale, decay = self.dense(x), 1.0, 1.0
        if h.mean() > 0:
            scale = 2.5
        while decay < steps.sum():
            decay = decay * 1.5
        return h * scale / decay


@pytest.mark.parametrize("train", [False, True])
@pytest.mark.parametrize("model", [BranchAndCollect, CountedSteps, ScaledByABranch])
def test_a_float64_model_with_branches_and_loops_runs_on_graphs(model, train):
    def float64_block():
        block = model()
        block.initialize(mx.init.Uniform(0.5))
        block.cast("float64")
        return block

    rng = np.random.RandomState(0)
    calls = [(mx.nd.array(rng.randn(2, 3) * (1 if k % 3 else -1), dtype="float64"),
              mx.nd.array([1 + k % 3], dtype="float64")) for k in range(12)]
    report = same_as_written(float64_block, calls, train=train, initialized=True,
                             check_speed=False)
    on_graphs(report, len(calls) - 3)     # after 3 profiled calls
