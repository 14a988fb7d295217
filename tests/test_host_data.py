"""Host data a forward turns into values is never frozen into a graph (host_data.py).

Host random numbers and arrays made from NumPy data differ from call to call, and
NumPy arrays kept on a block change in place: a graph would hold the values of
its trace. They run as Python on every call (a graph break), and a trace leaves
NumPy arrays and generators as it found them.
"""
import random
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon

import gluon_dyn
from dynamic_twins import assert_same, twins


class NumpyNoise(gluon.Block):
    def __init__(self, source):
        super().__init__()
        self.dense = gluon.nn.Dense(3, in_units=3)
        self.source = source
        self.table = np.zeros((1, 3), dtype="float32")

    def forward(self, x):
        h = self.dense(x)
        if self.source == "numpy random":
            noise = mx.nd.array(np.random.rand(1, 3))
        elif self.source == "python random":
            noise = mx.nd.full((1, 3), random.random())
        else:   # a NumPy array the block keeps and changes
            self.table += 1
            noise = mx.nd.array(self.table)
        return mx.nd.broadcast_add(h, noise)


@pytest.mark.parametrize("source", ["numpy random", "python random", "numpy state"])
def test_host_data_is_never_frozen_into_a_graph(source):
    imperative, dynamic = twins(lambda: NumpyNoise(source), check_speed=False)
    x = mx.nd.ones((2, 3))
    for call in range(7):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            np.random.seed(call)
            random.seed(call)
            expected = imperative(x)
            np.random.seed(call)
            random.seed(call)
            got = dynamic(x)
        assert_same(got, expected, "call %d" % call)
        np.testing.assert_array_equal(dynamic.table, imperative.table)
    report = gluon_dyn.hybridize.report(dynamic)
    assert not report["internal_errors"]
    # The statement runs as Python on every call: graph segments around it.
    assert report["graph_segments"]["graph_breaks"] and report["calls"]["graph"] == 4


class KeyedList(gluon.Block):
    """An array made from Python values the call's key holds stays in the graph."""

    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(3, in_units=3)
        self.scales = [0.5, 2.0, 1.0]

    def forward(self, x):
        return mx.nd.broadcast_mul(self.dense(x), mx.nd.array([self.scales]))


def test_arrays_from_keyed_python_values_stay_in_graphs():
    imperative, dynamic = twins(KeyedList, check_speed=False)
    for call in range(6):
        x = mx.nd.random.normal(shape=(2, 3))
        if call == 4:
            imperative.scales[0] = dynamic.scales[0] = 3.0
        assert_same(dynamic(x), imperative(x), "call %d" % call)
    report = gluon_dyn.hybridize.report(dynamic)
    assert report["graph_segments"] is None and report["calls"]["graph"] == 3
