"""NumPy values as new NDArrays made without waiting for MXNet's engine
(gluon_dyn/host_arrays.py), as the fused updates make a step's new rescale: a step
whose batch size varies (REINFORCE's episodes) no longer waits there for its
backward."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon

import gluon_dyn
from dynamic_twins import assert_same, twins
from engine_work import LOG, hold_the_engine
from gluon_dyn.host_arrays import host_array
from gluon_dyn.training.fused_updater import Fusion


@pytest.mark.parametrize("values", [np.arange(6, dtype=np.float32).reshape(2, 3),
                                    np.array([3, -4], np.int64), np.array([0.5])])
def test_a_host_array_is_made_without_waiting_for_the_engine(values):
    LOG.clear()
    hold_the_engine()
    array = host_array(values)
    LOG.append("made")
    assert LOG == ["made"]
    mx.nd.waitall()
    assert LOG == ["made", "engine work done"]
    assert array.dtype == values.dtype and array.context == mx.cpu()
    np.testing.assert_array_equal(array.asnumpy(), values)


def test_mxnets_own_copy_waits_for_the_engine():
    """What host_array avoids, and proof that the engine was held."""
    LOG.clear()
    hold_the_engine()
    mx.nd.array([1.0])
    LOG.append("made")
    assert LOG == ["engine work done", "made"]


@pytest.mark.parametrize("values", [np.zeros((0,), np.float32), np.float32(2.5)])
def test_a_host_array_of_no_elements_or_no_dimensions_is_made_as_mxnet_makes_it(values):
    array, expected = host_array(values), mx.nd.array(values)
    assert array.shape == expected.shape and array.dtype == expected.dtype
    np.testing.assert_array_equal(array.asnumpy(), expected.asnumpy())


def test_a_fused_update_makes_a_new_rescale_without_waiting_for_the_engine():
    fusion = Fusion()
    first = fusion.scalar(1 / 20, mx.cpu())
    assert fusion.scalar(1 / 20, mx.cpu()) is first       # kept while it is the same
    LOG.clear()
    hold_the_engine()
    changed = fusion.scalar(1 / 37, mx.cpu())
    LOG.append("made")
    assert LOG == ["made"]
    assert changed.dtype == np.float32
    np.testing.assert_array_equal(changed.asnumpy(), np.array([1 / 37], np.float32))


class FromNumpy(gluon.Block):
    """A NumPy argument the forward turns into an NDArray."""

    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(3, in_units=4)

    def forward(self, x):
        return self.dense(mx.nd.array(x))


def test_a_graph_call_makes_its_numpy_arguments_arrays_without_waiting_for_the_engine():
    imperative, dynamic = twins(FromNumpy, check_speed=False)
    batches = [np.random.RandomState(seed).uniform(-1, 1, (2, 4)).astype(np.float32)
               for seed in range(8)]
    for x in batches[:6]:
        assert_same(dynamic(x), imperative(x))
    LOG.clear()
    hold_the_engine()
    results = [dynamic(x) for x in batches[6:]]
    LOG.append("called")
    assert LOG == ["called"]
    for result, x in zip(results, batches[6:]):
        assert_same(result, imperative(x))
    assert gluon_dyn.hybridize.report(dynamic)["calls"]["by_kind"]["graph"] >= 4
