"""What users get wrong, or do between calls, under hybridize(dynamic=True): the
result is what Python gives (same values, same exception), never a crash, a hang,
a stale value or a half-applied state.

(Operator misuse - mismatched branch outputs, non-scalar predicates, wrong body
structure - is tested in test_op_errors.py, with the cond's file:line.)"""
import threading

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon

import gluon_dyn
from conftest import copy_params


class Scorer(gluon.Block):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(3, in_units=4)

    def forward(self, x):
        h = self.dense(x)
        if mx.nd.sum(h) > 0:
            h = h * 2
        return h


def pair(cls):
    imperative, dynamic = cls(), cls()
    for block in (imperative, dynamic):
        block.initialize(mx.init.Uniform(0.5))
    copy_params(imperative, dynamic)
    dynamic.hybridize(dynamic=True)
    return imperative, dynamic


def outcome(block, *args):
    try:
        result = block(*args)
    except Exception as error:  # noqa: BLE001 - the exception itself is compared
        return type(error).__name__
    results = result if isinstance(result, (list, tuple)) else [result]
    return [r.asnumpy() if isinstance(r, mx.nd.NDArray) else r for r in results]


def assert_same_outcome(imperative, dynamic, *args):
    expected, got = outcome(imperative, *args), outcome(dynamic, *args)
    if isinstance(expected, str):
        assert got == expected
        return
    assert len(got) == len(expected)
    for e, g in zip(expected, got):
        if isinstance(e, np.ndarray):
            assert isinstance(g, np.ndarray) and g.dtype == e.dtype and g.shape == e.shape
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
        else:
            assert type(g) is type(e) and g == pytest.approx(e)


class PythonResults(Scorer):
    """Returns Python values computed from tensors next to a tensor."""

    def forward(self, x):
        h = self.dense(x)
        return h, float(h.sum().asscalar()), h.shape[0], bool(h.max() > 0.1)


def test_python_values_returned_from_tensors_are_right_on_every_call():
    imperative, dynamic = pair(PythonResults)
    rng = np.random.RandomState(0)
    for batch in (2, 2, 3, 2, 5, 3, 2, 2):
        assert_same_outcome(imperative, dynamic, mx.nd.array(rng.randn(batch, 4)))


@pytest.mark.parametrize("dtype", ["float64", "float16", "int32"])
def test_an_input_dtype_the_graph_has_not_seen(dtype):
    imperative, dynamic = pair(Scorer)
    x = np.random.RandomState(1).randn(2, 4)
    for _ in range(5):
        assert_same_outcome(imperative, dynamic, mx.nd.array(x))
    # Either the same values (a graph for the new dtype) or the same exception.
    assert_same_outcome(imperative, dynamic, mx.nd.array(x, dtype=dtype))
    assert_same_outcome(imperative, dynamic, mx.nd.array(x))


def test_an_input_rank_the_graph_has_not_seen():
    imperative, dynamic = pair(Scorer)
    rng = np.random.RandomState(2)
    for shape in [(2, 4)] * 5 + [(2, 2, 4), (4,), (2, 4), (3, 5)]:
        assert_same_outcome(imperative, dynamic, mx.nd.array(rng.randn(*shape)))


class RaisesMidway(Scorer):
    def __init__(self):
        super().__init__()
        self.state = mx.nd.zeros((1, 3))

    def forward(self, x):
        h = self.dense(x)
        self.state = self.state + h.sum(axis=0, keepdims=True)
        if mx.nd.sum(x) > 5:
            raise ValueError("input too large")
        return h * 2


def test_a_forward_that_raises_midway_leaves_the_state_python_leaves():
    imperative, dynamic = pair(RaisesMidway)
    for scale in (0.1, -0.1, 0.1, 0.2, 3.0, 0.1, 3.0, -0.1):
        x = mx.nd.ones((2, 4)) * scale
        assert_same_outcome(imperative, dynamic, x)
        np.testing.assert_allclose(dynamic.state.asnumpy(), imperative.state.asnumpy(),
                                   rtol=1e-5)


def test_a_replaced_layer_and_reinitialised_parameters_are_used():
    imperative, dynamic = pair(Scorer)
    x = mx.nd.array(np.random.RandomState(3).randn(2, 4))
    for _ in range(6):
        assert_same_outcome(imperative, dynamic, x)
    for block in (imperative, dynamic):
        block.dense = gluon.nn.Dense(3, in_units=4)
        block.dense.initialize(mx.init.Constant(0.3))
    for _ in range(3):
        assert_same_outcome(imperative, dynamic, x)
    for block in (imperative, dynamic):
        block.dense.initialize(mx.init.Constant(-0.2), force_reinit=True)
    for _ in range(3):
        assert_same_outcome(imperative, dynamic, x)
    for block in (imperative, dynamic):
        block.dense = gluon.nn.Dense(5, in_units=4)
        block.dense.initialize(mx.init.Constant(0.1))
    assert_same_outcome(imperative, dynamic, x)
    assert "child block dense was replaced" in gluon_dyn.hybridize.report(dynamic)["cache_misses"]


def test_two_threads_calling_one_network_get_sequential_results():
    imperative, dynamic = pair(Scorer)
    rng = np.random.RandomState(4)
    inputs = [mx.nd.array(rng.randn(2, 4)) for _ in range(40)]
    expected = [imperative(x).asnumpy() for x in inputs]
    results = {}

    def worker(indices):
        for i in indices:
            results[i] = dynamic(inputs[i]).asnumpy()

    threads = [threading.Thread(target=worker, args=(range(k, len(inputs), 2),)) for k in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    for i, value in enumerate(expected):
        np.testing.assert_allclose(results[i], value, rtol=1e-5, atol=1e-6)
