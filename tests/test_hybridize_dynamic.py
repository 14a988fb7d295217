"""hybridize(dynamic=True, speculate=False) on HybridBlocks: converted control flow, Python values never frozen."""
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_dyn
from conftest import nd


class Gated(gluon.HybridBlock):
    """Python predicates (a flag, the training mode) around a tensor predicate."""

    def __init__(self):
        super().__init__()
        self.use_gate = True
        with self.name_scope():
            self.dense = gluon.nn.Dense(2, in_units=2)

    def hybrid_forward(self, F, x):
        y = self.dense(x)
        if self.use_gate:
            if F.sum(y) > 0:
                y = y * 2
            else:
                y = -y
        if autograd.is_training():
            y = y * 0.5
        return y


def reference(block, x):
    """The same computation written out by hand with NDArrays."""
    y = block.dense(x)
    if block.use_gate:
        y = y * 2 if y.sum().asscalar() > 0 else -y
    if autograd.is_training():
        y = y * 0.5
    return y


def paired(cls):
    mx.random.seed(0)
    dynamic = cls()
    dynamic.initialize()
    dynamic.hybridize(dynamic=True, speculate=False)
    return dynamic


@pytest.mark.parametrize("data", [[[1.0, 2.0]], [[-3.0, 1.0]]])
def test_flag_and_training_mode_switching_between_calls(data):
    block = paired(Gated)
    x = nd(data)
    for use_gate, training in [(True, False), (False, False), (True, True), (False, True),
                               (True, False)]:
        block.use_gate = use_gate
        with autograd.record(train_mode=training):
            got = block(x)
            expected = reference(block, x)
        np.testing.assert_allclose(got.asnumpy(), expected.asnumpy(), rtol=1e-6)
        assert gluon_dyn.hybridize.report(block)["calls"]["last"] == "graph"
    report = gluon_dyn.hybridize.report(block)
    assert report["cached_graphs"] == report["traces"] == 4  # one graph per combination, reused
    assert report["fallback"] is None
    assert report["converted"] == ["Gated.hybrid_forward"]


def test_plain_hybridize_keeps_mxnet_behaviour():
    """Without dynamic=True, MXNet traces once and the Python `if` stays frozen (#16932)."""
    block = Gated()
    block.initialize()
    block.hybridize()
    x = nd([[1.0, 2.0]])
    with pytest.raises(mx.base.NotImplementedForSymbol):
        block(x)  # a Python `if` on a Symbol is an error in plain hybridize
    block.hybridize(False)
    frozen = Gated()
    frozen.initialize()
    frozen.use_gate = False
    frozen.hybridize()
    first = frozen(x).asnumpy()
    frozen.use_gate = True   # plain hybridize keeps the graph traced with use_gate=False
    np.testing.assert_allclose(frozen(x).asnumpy(), first)


class Counting(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def hybrid_forward(self, F, x):
        self.calls += 1
        return x * 2


def test_a_counter_on_self_runs_on_the_graph_and_is_written_back():
    block = Counting()
    block.initialize()
    block.hybridize(dynamic=True, speculate=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            np.testing.assert_allclose(block(nd([1.0])).asnumpy(), [2.0])
    assert block.calls == 3
    assert not [w for w in caught if "gluon_dyn" in str(w.message)]
    report = gluon_dyn.hybridize.report(block)
    assert report["fallback"] is None and report["deferred_state"]["numbers"] == ["calls"]
    assert report["calls"]["by_kind"]["graph"] == 3   # nothing profiled (speculate=False)


class LogsThenPrints(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        self.log = []

    def hybrid_forward(self, F, x):
        self.log.append("called")
        print("hybrid_forward called")
        return x * 2


def test_a_trace_that_stops_leaves_no_side_effect_behind(capsys):
    block = LogsThenPrints()
    block.hybridize(dynamic=True, speculate=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):
            block(nd([1.0]))
    assert block.log == ["called"] * 3
    assert capsys.readouterr().out.count("hybrid_forward called") == 3
    # The print runs as Python between graph segments of the hybrid_forward.
    report = gluon_dyn.hybridize.report(block)
    assert report["fallback"] is None and report["calls"]["last"] == "segments"
    assert "print() must run on every call" in report["graph_segments"]["graph_breaks"][0]["why"]


class KeepsSymbols(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        self.memory = {"last": None}

    def hybrid_forward(self, F, x):
        self.memory["last"] = x * 2
        return x + 1


def test_graph_values_stored_into_kept_containers_are_written_after_the_graph_runs():
    block = KeepsSymbols()
    block.hybridize(dynamic=True, speculate=False)
    for value in (1.0, 2.0, 3.0):
        np.testing.assert_allclose(block(nd([value])).asnumpy(), [value + 1])
        np.testing.assert_allclose(block.memory["last"].asnumpy(), [value * 2])
    report = gluon_dyn.hybridize.report(block)
    assert report["fallback"] is None and report["deferred_state"]["containers"] == ["memory"]
    assert report["calls"]["by_kind"]["graph"] == 3   # nothing profiled (speculate=False)


def test_hybrid_block_speculation_inlines_a_one_way_branch_and_relaxes_on_failure():
    block = Gated()
    block.initialize(mx.init.Constant(0.5))
    block.hybridize(dynamic=True, profile_calls=2)
    positive, negative = nd([[1.0, 2.0]]), nd([[-3.0, -1.0]])
    for x in (positive, positive, positive, positive, negative, negative, positive):
        np.testing.assert_allclose(block(x).asnumpy(), reference(block, x).asnumpy(), rtol=1e-6)
    report = gluon_dyn.hybridize.report(block)
    assert report["guard_failures"] == [report["guard_failures"][0]]
    assert "went else, assumed then" in report["guard_failures"][0]
    assert "if: cond (graph)" in report["statements"].values()
