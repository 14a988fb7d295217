"""MXNet arrays handed to TVM and TVM's results handed back in one C call each
(tvm_bridge/ndarray_exchange.py): the views share the arrays' memory once their
pending writes are done, misaligned memory and arrays off the CPU are told apart, and
the results are NDArrays sharing TVM's memory, which they keep alive. A whole call of
a TVM function in one C call (tvm_caller) passes views and prepared values, gives
NDArrays sharing its results' memory, keeps no reference, and declines (None) the
calls its caller's own path is to make."""
import ctypes
import gc

import mxnet as mx
import numpy as np
import pytest
import tvm
import tvm_ffi

from engine_work import LOG, hold_the_engine
from gluon_dyn import native
from tvm_bridge import ndarray_exchange, runtime

MAKE_ARRAY = tvm_ffi.get_global_func("ffi.Array")   # its arguments, as an Array
IDENTITY = tvm_ffi.convert(lambda tensor: tensor)


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


def strong_references(tvm_object):
    """The count of strong references TVM holds to `tvm_object` (TVMFFIObject's header)."""
    return ctypes.c_uint64.from_address(tvm_object.__chandle__()).value & 0xFFFFFFFF


def test_a_whole_call_passes_views_and_prepared_values_and_gives_arrays_sharing_its_results():
    data, parameter = mx.nd.arange(4), mx.nd.ones((2,))
    prepared = tvm.runtime.tensor(np.arange(3, dtype=np.float32))
    call = ndarray_exchange.tvm_caller(MAKE_ARRAY, [parameter],
                                       native.ndarray_versions([parameter]), [prepared], 2, True)
    viewed, passed = call([data])
    assert isinstance(viewed, mx.nd.NDArray) and isinstance(passed, mx.nd.NDArray)
    assert ndarray_exchange.cpu_view(viewed, 1)[0] == ndarray_exchange.cpu_view(data, 1)[0]
    assert ndarray_exchange.cpu_view(passed, 1)[0] == prepared.data_ptr()
    np.testing.assert_array_equal(passed.asnumpy(), [0, 1, 2])
    single = ndarray_exchange.tvm_caller(IDENTITY, [], (), [], 1, False)([data])
    assert isinstance(single, mx.nd.NDArray)
    data[:] = 5
    np.testing.assert_array_equal(single.asnumpy(), [5] * 4)


def test_a_whole_call_keeps_no_reference_to_what_it_passed_or_made():
    prepared = tvm.runtime.tensor(np.arange(3, dtype=np.float32))
    before = strong_references(prepared)
    call = ndarray_exchange.tvm_caller(MAKE_ARRAY, [], (), [prepared], 2, True)
    results = [call([mx.nd.arange(4)]) for _ in range(20)]
    assert strong_references(prepared) == before + 20      # one per array made of it
    del results
    gc.collect()
    assert strong_references(prepared) == before


def test_a_whole_call_is_declined_where_the_callers_own_path_is_to_make_it():
    data, parameter = mx.nd.arange(17), mx.nd.ones((2,))
    version = native.ndarray_versions([parameter])

    def declined(function, data, num_results=1, returns_tuple=False):
        return ndarray_exchange.tvm_caller(function, [parameter], version, [], num_results,
                                           returns_tuple)([data]) is None

    def raising(_):
        raise ValueError("raised in TVM")

    assert not declined(IDENTITY, data)
    assert declined(IDENTITY, data[1:])                                  # misaligned
    assert declined(IDENTITY, data.as_in_context(mx.Context("cpu_shared", 0)))
    assert declined(tvm_ffi.convert(raising), data)
    assert declined(tvm_ffi.convert(lambda _: 3), data)                  # not a tensor
    assert declined(MAKE_ARRAY, data, num_results=2, returns_tuple=True)  # one, not two
    assert not declined(MAKE_ARRAY, data, num_results=1, returns_tuple=True)
    parameter[:] = 2                                       # written since its version
    assert declined(IDENTITY, data)
    # The error TVM raised was dropped: TVM's next call and its errors are its own.
    np.testing.assert_array_equal(IDENTITY(tvm.runtime.tensor(np.ones(2, np.float32))).numpy(),
                                  [1, 1])


def test_a_caller_reading_tvm_values_wrongly_is_not_used():
    """Built against another tvm-ffi's layout, the library could pass or read values
    wrongly: such a caller is not installed."""
    def swapping(*args):
        call = ndarray_exchange.tvm_caller(*args)
        return lambda data: (lambda results: results and results[::-1])(call(data))

    assert ndarray_exchange._calls_rightly(ndarray_exchange.tvm_caller)
    assert not ndarray_exchange._calls_rightly(swapping)
    assert runtime.tvm_caller is ndarray_exchange.tvm_caller   # tvm_bridge installed it


def test_the_callers_check_waits_for_the_writes_it_reads_back(monkeypatch):
    """_calls_rightly writes arrays and reads them back through TVM's results, which
    share their memory but not their engine variables: it waits for its writes, so that
    a busy engine (each write queued behind 0.2 s of engine work) does not make it
    refuse a library that reads TVM's values rightly."""
    setitem = mx.nd.NDArray.__setitem__

    def queued(array, key, value):
        hold_the_engine()
        setitem(array, key, value)

    monkeypatch.setattr(mx.nd.NDArray, "__setitem__", queued)
    assert ndarray_exchange._calls_rightly(ndarray_exchange.tvm_caller)
