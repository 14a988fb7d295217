"""A call repeating the latest one a graph served goes to that graph without its
key made again (cache_key.RepeatedCall), and every part of the key still counts:
a change of the arguments' shapes or dtypes, of the training mode, of a Python
value on the blocks, or a guard failing on the repeated call, each ends the
repetition, and the next call is keyed and served as without it."""
import sys

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_dyn
from gluon_dyn.hybridize.call import runner
from gluon_dyn.hybridize.call.call_description import CallMatch
import module_values
from dynamic_twins import assert_same, calls_on_graphs, twins


SHIFT = 0.0      # module-level values the policy reads
EXTRA_STEPS = [None]


class Policy(gluon.Block):
    """REINFORCE's kind of policy: a loop over layers, two heads, Python values on the
    block and in its module, and a branch on the data the profile speculates on."""

    def __init__(self):
        super().__init__()
        self.layers = gluon.nn.Sequential()
        self.layers.add(gluon.nn.Dense(8, in_units=4, activation="tanh"),
                        gluon.nn.Dropout(0.5), gluon.nn.Dense(8, in_units=8))
        self.value = gluon.nn.Dense(1, in_units=8)
        self.scale = 1.0

    def forward(self, x):
        h = x
        for layer in self.layers:
            h = layer(h)
        if h.sum() > -1e3:
            h = h * self.scale
        else:
            h = h - 1
        for _ in EXTRA_STEPS:
            h = h + SHIFT
        return mx.nd.log_softmax(h), self.value(h)[:, 0]


@pytest.fixture
def keys_made(monkeypatch):
    """The calls that made a cache key."""
    made = []
    original = runner.key_for
    monkeypatch.setattr(runner, "key_for", lambda *args: made.append(1) or original(*args))
    return made


def settled():
    imperative, dynamic = twins(Policy, check_speed=False)
    x = mx.nd.array(np.random.RandomState(0).uniform(-1, 1, (5, 4)))
    for _ in range(5):
        assert_same(dynamic(x), imperative(x))
    assert gluon_dyn.hybridize.report(dynamic)["calls"]["last"] == "graph"
    return imperative, dynamic


def inputs(seed, shape=(5, 4), dtype="float32"):
    return mx.nd.array(np.random.RandomState(seed).uniform(-1, 1, shape), dtype=dtype)


def test_a_repeated_call_is_served_by_its_graph_without_a_key(keys_made):
    imperative, dynamic = settled()
    keys_made.clear()
    before = calls_on_graphs(dynamic)
    for seed in range(6):
        x = inputs(seed)
        assert_same(dynamic(x), imperative(x), "call %d" % seed)
    assert keys_made == []
    assert calls_on_graphs(dynamic) == before + 6


@pytest.mark.parametrize("change", ["shape", "dimensions", "dtype", "training", "python value",
                                    "module list", "module number"])
def test_a_change_of_the_key_ends_the_repetition(keys_made, change, monkeypatch, request):
    imperative, dynamic = settled()
    keys_made.clear()
    shape, dtype = (5, 4), "float32"
    if change == "shape":
        shape = (3, 4)
    elif change == "dimensions":
        shape = (5, 1, 4)               # Dense flattens it
    elif change == "dtype":
        dtype = "float64"
        for block in (imperative, dynamic):
            block.cast(dtype)
    elif change == "python value":
        for block in (imperative, dynamic):
            block.scale = 3.0
    elif change == "module list":
        EXTRA_STEPS.append(None)        # changed in place: one more step
        request.addfinalizer(EXTRA_STEPS.pop)
    elif change == "module number":
        monkeypatch.setattr(sys.modules[__name__], "SHIFT", 0.5)
    traces = gluon_dyn.hybridize.report(dynamic)["traces"]
    for call in range(3):
        x = inputs(10 + call, shape, dtype)
        if change == "training":
            mx.random.seed(call)
            with autograd.train_mode():
                expected = imperative(x)
            mx.random.seed(call)
            with autograd.train_mode():
                got = dynamic(x)
        else:
            expected, got = imperative(x), dynamic(x)
        assert_same(got, expected, "%s, call %d" % (change, call))
    report = gluon_dyn.hybridize.report(dynamic)
    # One new key, made and traced at the first call after the change; the
    # next calls repeat it.
    assert keys_made == [1, 1] and report["traces"] == traces + 1, report["cache_misses"]
    assert report["calls"]["last"] == "graph"


class FromNumpy(Policy):
    """The policy given a NumPy batch, which it turns into an NDArray."""

    def forward(self, x):
        return super().forward(mx.nd.array(x))


@pytest.mark.parametrize("as_numpy", [False, True])
def test_repeated_calls_of_mxnet_arrays_are_told_by_one_c_call(keys_made, monkeypatch, as_numpy):
    """Calls of MXNet arrays repeat the latest one where its CallMatch matches them
    (call_description.py); calls of NumPy arrays, where their skeleton fits."""
    matched = []
    original = CallMatch.matches
    monkeypatch.setattr(CallMatch, "matches", lambda self, arrays: matched.append(1) or
                        original(self, arrays))
    imperative, dynamic = twins(FromNumpy if as_numpy else Policy, check_speed=False)
    for seed in range(8):
        x = inputs(seed)
        x = x.asnumpy() if as_numpy else x
        assert_same(dynamic(x), imperative(x), "call %d" % seed)
    repeated = 8 - gluon_dyn.hybridize.report(dynamic)["calls"]["by_kind"]["profiling"] - \
        len(keys_made)
    assert repeated >= 3 and calls_on_graphs(dynamic) == 8 - 3
    # (A call made right after a trace may try the match and be keyed.)
    assert len(matched) == 0 if as_numpy else len(matched) >= repeated


def test_a_guard_failing_on_a_repeated_call_runs_it_as_written(keys_made):
    imperative, dynamic = settled()
    keys_made.clear()
    for block in (imperative, dynamic):
        block.value.bias.set_data(mx.nd.array([0.0]))
        block.layers[2].bias.set_data(mx.nd.array([-1e4] * 8))   # the other branch
    x = inputs(20)
    assert_same(dynamic(x), imperative(x))
    report = gluon_dyn.hybridize.report(dynamic)
    assert len(report["guard_failures"]) == 1 and report["calls"]["last"] == "guard_failed"
    assert keys_made == []      # the failing call was the repeated one
    for call in range(3):
        x = inputs(21 + call)
        assert_same(dynamic(x), imperative(x), "call %d" % call)
    assert gluon_dyn.hybridize.report(dynamic)["calls"]["last"] == "graph"
    assert len(keys_made) >= 1


class Inherited(module_values.Factored):
    """Its forward is written in another module, and reads that module's values."""


class Helped(gluon.Block):
    """A forward whose helpers and child, written in another module, read that
    module's values."""

    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(3, in_units=4)
        self.offset = module_values.Offset()
        self.factored = Inherited()

    def forward(self, x):
        return self.factored(self.offset(module_values.scaled(self.dense(x))))


@pytest.mark.parametrize("change", ["number", "list", "inherited forward's number"])
def test_values_of_the_modules_of_called_code_are_in_the_key(change, monkeypatch, request):
    """The key holds the values read in the modules of the code a trace called (and
    of no other module): changing one, between calls the same in all else, makes
    a new graph."""
    imperative, dynamic = twins(Helped, check_speed=False)
    x = inputs(30)
    for _ in range(5):
        assert_same(dynamic(x), imperative(x))
    if change == "number":
        monkeypatch.setattr(module_values, "SCALE", 3.0)
    elif change == "inherited forward's number":
        monkeypatch.setattr(module_values, "FACTOR", 0.5)
    else:
        module_values.OFFSETS.append(1.0)
        request.addfinalizer(module_values.OFFSETS.pop)
    for call in range(3):
        assert_same(dynamic(x), imperative(x), "call %d" % call)
    report = gluon_dyn.hybridize.report(dynamic)
    assert report["traces"] == 2 and report["calls"]["last"] == "graph", report["cache_misses"]
    assert "module_values" in report["cache_misses"][-1]
