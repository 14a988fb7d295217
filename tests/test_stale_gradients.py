"""Training follows imperative MXNet's trajectory: parameters a call's path did not
use keep stale gradients, so Trainer.step skips them (ignore_stale_grad=True) or
raises MXNet's own error; for kept branches, speculated ones and loops that ran
zero times, with momentum and weight decay."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_dyn
from conftest import nd


class TwoHeads(gluon.Block):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.left = gluon.nn.Dense(2, in_units=2)
            self.right = gluon.nn.Dense(2, in_units=2)
            self.refine = gluon.nn.Dense(2, in_units=2)

    def forward(self, x, steps):
        y = self.left(x) if mx.nd.sum(x) > 0 else self.right(x)
        i = mx.nd.zeros((1,))
        while mx.nd.sum(i) < mx.nd.sum(steps):     # may run zero times: refine unused
            y = mx.nd.tanh(self.refine(y))
            i = i + 1
        return y


def train(dynamic, speculate, calls, ignore_stale_grad=True):
    mx.random.seed(0)
    block = TwoHeads()
    block.initialize(mx.init.Uniform(0.5))
    if dynamic:
        block.hybridize(dynamic=True, speculate=speculate, check_speed=False)
    trainer = gluon.Trainer(block.collect_params(), "sgd",
                            {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.01})
    for sign, steps in calls:
        with autograd.record():
            loss = block(nd([[1.0, 2.0]]) * sign, nd([steps])).sum()
        loss.backward()
        trainer.step(1, ignore_stale_grad=ignore_stale_grad)
    return block


CALLS = [(1, 1), (-1, 0), (1, 2), (1, 0), (-1, 1), (-1, 2), (1, 1), (-1, 0)]


@pytest.mark.parametrize("speculate", [False, True])
def test_parameters_of_untaken_paths_follow_the_imperative_trajectory(speculate):
    imperative = train(False, speculate, CALLS)
    dynamic = train(True, speculate, CALLS)
    for (name, expected), (_, got) in zip(sorted(imperative.collect_params().items()),
                                          sorted(dynamic.collect_params().items())):
        np.testing.assert_allclose(got.data().asnumpy(), expected.data().asnumpy(), rtol=1e-5,
                                   atol=1e-6, err_msg=name)
    report = gluon_dyn.hybridize.report(dynamic)
    # graphs served every call but the 3 profiled when speculating
    after = len(CALLS) - (3 if speculate else 0)
    assert (report["calls"]["after_profiling"], report["calls"]["graph"]) == (after, after)
    if not speculate:
        assert {"conditional expression: cond (graph)", "while: while_loop (graph)"} <= \
            set(report["statements"].values())


def test_a_stale_parameter_raises_as_imperatively_without_ignore_stale_grad():
    """The first step's untaken branch (`right`, the second Dense) is stale."""
    for dynamic in (False, True):
        with pytest.raises(UserWarning, match=r"Parameter `twoheads\d+_dense1_(weight|bias)` on context "
                           r"cpu\(0\) has not been updated by backward since last `step`"):
            train(dynamic, False, [(1, 1), (1, 0)], ignore_stale_grad=False)
