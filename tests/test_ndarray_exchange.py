"""MXNet arrays handed to TVM and TVM's results handed back in one C call each
(tvm_bridge/ndarray_exchange.py): the views share the arrays' memory once their
pending writes are done, misaligned memory and arrays off the CPU are told apart, and
the results are NDArrays sharing TVM's memory, which they keep alive."""
import gc

import mxnet as mx
import numpy as np
import pytest
import tvm

from engine_work import LOG, hold_the_engine
from tvm_bridge import ndarray_exchange, runtime


def test_an_aligned_array_is_viewed_where_its_memory_is():
    array = mx.nd.array(np.arange(12, dtype=np.float32).reshape(3, 4))
    address, capsule = ndarray_exchange.cpu_view(array, runtime.TVM_ALIGNMENT)
    view = tvm.runtime.from_dlpack(capsule)
    assert view.data_ptr() == address and address % runtime.TVM_ALIGNMENT == 0
    np.testing.assert_array_equal(view.numpy(), array.asnumpy())
    array[:] = 7       # the view is the array's memory
    array.wait_to_read()
    np.testing.assert_array_equal(view.numpy(), np.full((3, 4), 7, np.float32))


def test_a_misaligned_array_gives_its_address_and_no_view():
    array = mx.nd.array(np.arange(17, dtype=np.float32))
    base, _ = ndarray_exchange.cpu_view(array, runtime.TVM_ALIGNMENT)
    address, capsule = ndarray_exchange.cpu_view(array[1:], runtime.TVM_ALIGNMENT)
    assert capsule is None and address == base + 4


def test_an_array_off_the_cpu_is_refused_naming_its_context():
    shared = mx.nd.ones((2, 3)).as_in_context(mx.Context("cpu_shared", 0))
    with pytest.raises(ValueError, match=r"arrays must be on the CPU, got one on cpu_shared\(0\)"):
        ndarray_exchange.cpu_view(shared, runtime.TVM_ALIGNMENT)


def test_an_array_is_viewed_once_the_writes_queued_to_it_are_done():
    LOG.clear()
    source = mx.nd.ones((4, 4))
    hold_the_engine()
    written = source * 3                  # queued behind the held engine
    _, capsule = ndarray_exchange.cpu_view(written, runtime.TVM_ALIGNMENT)
    LOG.append("viewed")
    assert LOG == ["engine work done", "viewed"]
    np.testing.assert_array_equal(tvm.runtime.from_dlpack(capsule).numpy(), np.full((4, 4), 3))


def test_tvm_results_become_ndarrays_sharing_and_keeping_their_memory():
    values = [np.arange(6, dtype=np.float32).reshape(2, 3), np.array([5, 6], np.int64)]
    tensors = [tvm.runtime.tensor(value) for value in values]
    addresses = [tensor.data_ptr() for tensor in tensors]
    arrays = ndarray_exchange.ndarrays_of_tvm(tensors)
    del tensors
    gc.collect()
    for array, value, address in zip(arrays, values, addresses):
        assert isinstance(array, mx.nd.NDArray) and array.dtype == value.dtype
        np.testing.assert_array_equal(array.asnumpy(), value)
        view, _ = ndarray_exchange.cpu_view(array, 1)
        assert view == address


def test_a_library_that_takes_shared_memory_for_the_cpu_is_not_used():
    """Built against another MXNet's NDArray layout, the library could read any
    device as the CPU: such a view is not installed."""
    def viewing_everything(array, alignment):
        return ndarray_exchange.cpu_view(array.as_in_context(mx.cpu()), alignment)

    assert ndarray_exchange._views_rightly(ndarray_exchange.cpu_view)
    assert not ndarray_exchange._views_rightly(viewing_everything)
    assert runtime.ndarray_cpu_view is ndarray_exchange.cpu_view   # tvm_bridge installed it
