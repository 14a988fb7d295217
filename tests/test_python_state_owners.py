"""A trace never leaves its Symbols in Python state, whoever owns the state.

While a forward is traced its values are Symbols; whatever it stores them into (a
block's private attribute, a child block, a container nested in a container, a
module variable, a variable of an enclosing function) holds arrays again
afterwards: graph outputs written back after each run where a graph can describe
the state, the forward run as Python where it cannot.
"""
import warnings

import mxnet as mx
import pytest
from mxnet import gluon

import gluon_dyn
from dynamic_twins import assert_same, calls_on_graphs, twins


def test_zoneout_cell_keeps_its_previous_output_across_unrolls():
    """Gluon's ZoneoutCell, as MXNet ships it, stores its output on itself
    (`self._prev_output`) and reads it on the next step."""
    def make():
        return gluon.rnn.ZoneoutCell(gluon.rnn.LSTMCell(8, input_size=4),
                                     zoneout_outputs=0.5, zoneout_states=0.5)
    imperative, dynamic = twins(make, init=mx.init.Xavier(), check_speed=False)
    for call in range(4):
        x = mx.nd.random.normal(shape=(2, 5, 4))
        outs = [block.unroll(5, x, merge_outputs=True) for block in (imperative, dynamic)]
        assert_same(outs[1], outs[0], "unroll %d" % call)
        assert isinstance(dynamic._prev_output, mx.nd.NDArray)
        assert_same(dynamic._prev_output, imperative._prev_output)
    assert calls_on_graphs(dynamic) == 4 * 5 - 3


class PrivateState(gluon.Block):
    """State kept in private attributes, as library code keeps it."""

    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(3, in_units=3)
        self._steps = 0
        self._last = None

    def forward(self, x):
        self._steps += 1
        h = self.dense(x)
        if self._last is not None:
            h = h + self._last
        self._last = h * 0.5
        return h * self._steps


def test_private_attributes_are_state():
    imperative, dynamic = twins(PrivateState, check_speed=False)
    for call in range(7):
        x = mx.nd.random.normal(shape=(2, 3))
        assert_same(dynamic(x), imperative(x), "call %d" % call)
        assert dynamic._steps == imperative._steps
        assert_same(dynamic._last, imperative._last)
    assert calls_on_graphs(dynamic) == 4


class NestedMemory(gluon.Block):
    """Appends to a list inside a dict it keeps."""

    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(2, in_units=2)
        self.memory = {"layers": [[]]}

    def forward(self, x):
        h = self.dense(x)
        self.memory["layers"][0].append(h)
        return h


CACHE = {}
LAST = None


class WritesOutside(gluon.Block):
    def __init__(self, where):
        super().__init__()
        self.dense = gluon.nn.Dense(2, in_units=2)
        self.where = where
        self.cell = {}
        closure_cache = self.cell

        def remember(value):
            closure_cache["h"] = value
        self.remember = remember

    def forward(self, x):
        global LAST
        h = self.dense(x)
        if self.where == "module dict":
            CACHE["h"] = h
        elif self.where == "module variable":
            LAST = h
        else:
            self.remember(h)
        return h


def stored(block):
    """What the block's forward stored where it stores its values."""
    if isinstance(block, NestedMemory):
        return block.memory["layers"][0][-1]
    return {"module dict": lambda: CACHE["h"], "module variable": lambda: LAST,
            "closure": lambda: block.cell["h"]}[block.where]()


@pytest.mark.parametrize("make", [NestedMemory, lambda: WritesOutside("module dict"),
                                  lambda: WritesOutside("module variable"),
                                  lambda: WritesOutside("closure")],
                         ids=["nested container", "module dict", "module variable", "closure"])
def test_values_stored_where_no_graph_writes_them_back_stay_arrays(make):
    imperative, dynamic = twins(make, check_speed=False)
    for call in range(5):
        x = mx.nd.random.normal(shape=(1, 2))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = imperative(x)
            assert_same(stored(imperative), expected)
            got = dynamic(x)
        assert_same(got, expected, "call %d" % call)
        assert_same(stored(dynamic), expected, "stored by call %d" % call)
    if isinstance(dynamic, NestedMemory):
        assert_same(dynamic.memory, imperative.memory)
    report = gluon_dyn.hybridize.report(dynamic)
    assert report["fallback"] and not report["internal_errors"]
