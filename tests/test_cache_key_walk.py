"""The cache key's walk of a block tree (python_state.py): a call re-walks only the
blocks whose attributes changed, and keys a dict without the repr of its values,
while every change anywhere in the tree still changes the key."""
import mxnet as mx
import numpy as np
from mxnet import gluon

import gluon_dyn
from gluon_dyn.hybridize.capturing import python_state
from dynamic_twins import assert_same, calls_on_graphs, twins


class Scaled(gluon.Block):
    """A Dense layer whose output is scaled by a Python number it keeps."""

    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(3, in_units=3)
        self.scale = 1.0

    def forward(self, x):
        return self.dense(x) * self.scale


class ReprCounted:
    """An object a block keeps in a dict (d2l's `hparams` keep whole sub-networks)."""
    reprs = 0

    def __repr__(self):
        ReprCounted.reprs += 1
        return "ReprCounted()"


class Deep(gluon.Block):
    """Three levels of blocks; the innermost keeps a list it replaces on every call."""

    def __init__(self):
        super().__init__()
        self.outer = gluon.nn.Sequential()
        self.outer.add(Scaled(), Scaled())
        self.hparams = {"kept": ReprCounted(), "size": 3}
        self.log = []

    def forward(self, x):
        self.log = [x.shape[0]]
        for layer in self.outer:
            x = layer(x)
        return x


def make():
    return Deep()


def settled_twins(make_block, seed):
    """Twins of `make_block` and an input, after the calls that put the dynamic one on
    its graph."""
    imperative, dynamic = twins(make_block, initialized=False, init=mx.init.Uniform(0.5),
                                check_speed=False)
    x = mx.nd.array(np.random.RandomState(seed).standard_normal((2, 3)))
    for _ in range(5):
        assert_same(dynamic(x), imperative(x))
    return imperative, dynamic, x


def test_a_call_rewalks_only_the_blocks_it_changed(monkeypatch):
    imperative, dynamic, x = settled_twins(make, 0)
    walked = []
    original = python_state._walk_block
    monkeypatch.setattr(python_state, "_walk_block",
                        lambda node, path: walked.append(node) or original(node, path))
    ReprCounted.reprs = 0
    assert_same(dynamic(x), imperative(x))
    assert gluon_dyn.hybridize.report(dynamic)["calls"]["last"] == "graph"
    # The forward replaced `log` on the top block: that block only, of 6.
    assert walked == [dynamic]
    assert ReprCounted.reprs == 0


def test_a_change_deep_in_the_tree_changes_the_key():
    imperative, dynamic = twins(make, initialized=False, init=mx.init.Uniform(0.5),
                                check_speed=False)
    x = mx.nd.array(np.random.RandomState(1).standard_normal((2, 3)))
    for call in range(8):
        if call == 5:
            for block in (imperative, dynamic):
                block.outer[1].scale = 3.0
        assert_same(dynamic(x), imperative(x), "call %d" % call)
    report = gluon_dyn.hybridize.report(dynamic)
    assert report["traces"] == 2 and calls_on_graphs(dynamic) == 5
    assert "Python value outer.1.scale" in report["cache_misses"][-1]


class Gated(gluon.Block):
    """A Dense layer and the Python values its forward branches on; `steps` appears later."""

    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(3, in_units=3)
        self.doubled = False

    def forward(self, x):
        x = self.dense(x)
        if self.doubled:
            x = x * 2
        for _ in getattr(self, "steps", ()):
            x = x + 1
        return x


def test_a_tree_keyed_without_a_walk_still_sees_each_change(monkeypatch):
    # A tree holding no list, dict or set is keyed again only after a counted
    # change; once a block holds a list, the list's contents are keyed at each call.
    imperative, dynamic, x = settled_twins(Gated, 2)
    keyed = []
    original = python_state._WalkedBlock.key_items
    monkeypatch.setattr(python_state._WalkedBlock, "key_items",
                        lambda self, unkeyed: keyed.append(self) or original(self, unkeyed))
    assert_same(dynamic(x), imperative(x))
    assert keyed == []
    for change in ("doubled", "steps", "append", "append", "clear"):
        for block in (imperative, dynamic):
            if change == "doubled":
                block.doubled = True
            elif change == "steps":
                block.steps = [0]
            elif change == "append":
                block.steps.append(0)
            else:
                block.steps.clear()
        for _ in range(2):
            assert_same(dynamic(x), imperative(x), change)
    report = gluon_dyn.hybridize.report(dynamic)
    assert report["traces"] == 6 and calls_on_graphs(dynamic) >= 12, report
