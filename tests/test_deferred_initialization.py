"""Gluon's deferred initialization under hybridize(dynamic=True), whatever the options.

A layer made without its input size (`nn.Dense(4)`) gets its parameters on its
first call. With no profiling calls (`profile_calls=0`, `speculate=False`), that
first call is traced: its layers are initialized from the shapes the trace
knows, and a parameter whose shape the trace cannot tell is initialized by
running the call as written (deferred_init.py).
"""
import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon

import gluon_dyn
from dynamic_twins import calls_on_graphs


class Lazy(gluon.Block):
    """Layers initialized on their first call, one of them under a branch on a tensor."""

    def __init__(self):
        super().__init__()
        self.first = gluon.nn.Dense(4)
        self.second = gluon.nn.Dense(4)
        self.cell = gluon.rnn.LSTMCell(5)

    def forward(self, x):
        h = self.first(x)
        if h.sum() > 0:
            h = self.second(h)
        out, _ = self.cell(h, self.cell.begin_state(batch_size=x.shape[0]))
        return out


class LazyHybrid(gluon.HybridBlock):
    """A HybridBlock whose own layers wait for their input sizes."""

    def __init__(self):
        super().__init__()
        self.first = gluon.nn.Dense(4)
        self.second = gluon.nn.Dense(2)

    def hybrid_forward(self, F, x):
        return self.second(F.relu(self.first(x)))


@pytest.mark.parametrize("make", [Lazy, LazyHybrid], ids=["Block", "HybridBlock"])
@pytest.mark.parametrize("options", [{"profile_calls": 0}, {"speculate": False}],
                         ids=["profile_calls=0", "speculate=False"])
def test_first_call_finishes_deferred_initialization(make, options):
    mx.random.seed(0)
    dynamic = make()
    dynamic.initialize(mx.init.Uniform(0.5))
    dynamic.hybridize(dynamic=True, check_speed=False, **options)
    x = mx.nd.random.uniform(shape=(2, 6))
    first = dynamic(x)
    # The parameters are those of a copy initialized imperatively by the same call.
    imperative = make()
    imperative.initialize(mx.init.Uniform(0.5))
    imperative(x)
    for (_, a), (_, b) in zip(sorted(imperative.collect_params().items()),
                              sorted(dynamic.collect_params().items())):
        assert a.shape == b.shape
        a.set_data(b.data())
    np.testing.assert_allclose(first.asnumpy(), imperative(x).asnumpy(), rtol=1e-5, atol=1e-5)
    for _ in range(3):
        x = mx.nd.random.uniform(shape=(2, 6))
        np.testing.assert_allclose(dynamic(x).asnumpy(), imperative(x).asnumpy(), rtol=1e-5,
                                   atol=1e-5)
    report = gluon_dyn.hybridize.report(dynamic)
    assert report["fallback"] is None and not report["internal_errors"]
    assert calls_on_graphs(dynamic) == 4
