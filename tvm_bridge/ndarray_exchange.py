"""MXNet NDArrays handed to TVM and TVM's results handed back, sharing memory through
DLPack, one C call each way, and a whole call of a compiled function in one C call
(src/ndarray/dlpack_exchange.cc, in gluon_dyn's native library). runtime.py does the
same through MXNet's and TVM's Python APIs where these are not installed, as in a
deployment without gluon_dyn."""
import ctypes
import warnings

import mxnet as mx
import numpy as np
import tvm
import tvm_ffi
from tvm_ffi import libinfo

from gluon_dyn import native

from . import runtime

# Python's capsule maker as MXNet declares it (mxnet/base.py: it returns the capsule).
_new_capsule = ctypes.pythonapi.PyCapsule_New
_DLTENSOR = b"dltensor"


def _library():
    """gluon_dyn's native library with its exchange functions set up; None, with a
    warning, where it has none (built from older sources)."""
    library = native.library_with("gluon_dyn_ndarrays_of_tvm")
    if library is None:
        return None
    library.gluon_dyn_ndarray_cpu_view.restype = ctypes.c_int
    library.gluon_dyn_ndarray_cpu_view.argtypes = [
        ctypes.c_void_p, ctypes.c_uint64, ctypes.POINTER(ctypes.c_void_p),
        ctypes.POINTER(ctypes.c_void_p)]
    library.gluon_dyn_ndarrays_of_tvm.restype = ctypes.c_int
    library.gluon_dyn_ndarrays_of_tvm.argtypes = [
        ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]
    mxnet = mx.base._LIB     # pylint: disable=protected-access
    tvm_library = ctypes.CDLL(libinfo.find_libtvm_ffi())
    library.gluon_dyn_use_exchange_functions(*[ctypes.cast(used, ctypes.c_void_p) for used in (
        mxnet.MXNDArrayWaitToRead, mxnet.MXNDArrayGetData, mxnet.MXNDArrayToDLPack,
        mxnet.MXNDArrayFromDLPackEx, mxnet.MXNDArrayFree, tvm_library.TVMFFITensorToDLPack)])
    if hasattr(library, "gluon_dyn_call_tvm"):
        library.gluon_dyn_call_tvm.restype = ctypes.c_int
        library.gluon_dyn_use_tvm_call_functions(*[ctypes.cast(used, ctypes.c_void_p) for used in (
            tvm_library.TVMFFITensorFromDLPack, tvm_library.TVMFFIFunctionCall,
            tvm_library.TVMFFIObjectDecRef, tvm_library.TVMFFIErrorMoveFromRaised)])
    return library


def _exchange():
    """(cpu_view, ndarrays_of_tvm, tvm_caller) below, or Nones without the library."""
    library = _library()
    if library is None:
        return None, None, None
    view_function, import_function = library.gluon_dyn_ndarray_cpu_view, \
        library.gluon_dyn_ndarrays_of_tvm
    # MXNet's own deleter of the capsules it makes, for one nothing consumed.
    deleter = mx.nd.ndarray._c_dlpack_deleter     # pylint: disable=protected-access
    ndarray = mx.nd.NDArray

    def cpu_view(array, alignment):
        """(the data address of `array`, an NDArray, once its pending writes are done;
        a DLPack capsule viewing it, or None where the address is not a multiple of
        `alignment`); ValueError where the array is not on the CPU."""
        address, managed = ctypes.c_void_p(), ctypes.c_void_p()
        status = view_function(array.handle, alignment, ctypes.byref(address),
                               ctypes.byref(managed))
        if status == 1:
            raise ValueError(f"arrays must be on the CPU, got one on {array.context}")
        if status != 0:
            mx.base.check_call(-1)   # raises MXNet's last error
        capsule = None if managed.value is None else _new_capsule(managed, _DLTENSOR, deleter)
        return address.value or 0, capsule

    def ndarrays_of_tvm(tensors):
        """TVM's tensors `tensors` as NDArrays sharing their memory."""
        count = len(tensors)
        handles = (ctypes.c_void_p * count)(*[tensor.__chandle__() for tensor in tensors])
        made = (ctypes.c_void_p * count)()
        status = import_function(handles, count, made)
        if status == 1:
            raise RuntimeError("TVM could not export one of its result tensors as DLPack")
        if status != 0:
            mx.base.check_call(-1)
        return [ndarray(mx.base.NDArrayHandle(handle)) for handle in made]

    if not _views_rightly(cpu_view):
        warnings.warn("gluon_dyn: %s tells arrays on the CPU wrongly (built for another "
                      "MXNet?); %s" % (native.LIBRARY_PATH, native.REBUILD))
        return None, None, None
    tvm_caller = _tvm_caller(library)
    if tvm_caller is not None and not _calls_rightly(tvm_caller):
        warnings.warn("gluon_dyn: %s reads TVM's values wrongly (built for another tvm-ffi?); "
                      "%s" % (native.LIBRARY_PATH, native.REBUILD))
        tvm_caller = None
    return cpu_view, ndarrays_of_tvm, tvm_caller


def _tvm_caller(library):
    """`tvm_caller(function, parameters, versions, prepared, num_results, returns_tuple)`:
    the call of the compiled TVM function `function` on NDArrays `data` and then the TVM
    objects `prepared`, made for the parameter NDArrays `parameters` at their versions
    `versions`, as a function `call(data)` giving the NDArrays of its results (a list
    of `num_results`; one NDArray where not `returns_tuple`) in one C call, or None where
    the caller's own path is to serve it (gluon_dyn_call_tvm says when: a data array it
    cannot view, a parameter written since, an error TVM raised); MXNet's errors raise.
    None where the library has no such call (built from older sources)."""
    if not hasattr(library, "gluon_dyn_call_tvm"):
        return None
    function_call = library.gluon_dyn_call_tvm
    ndarray, handle_type, alignment = mx.nd.NDArray, mx.base.NDArrayHandle, \
        ctypes.c_uint64(runtime.TVM_ALIGNMENT)

    def tvm_caller(function, parameters, versions, prepared, num_results, returns_tuple):
        # The arguments but the data and the results, made once; the closure keeps
        # alive what their handles point to.
        kept = (function, list(parameters), list(prepared))
        function_handle = ctypes.c_void_p(function.__chandle__())
        after = (alignment,
                 (ctypes.c_void_p * len(parameters))(*[array.handle.value for array in parameters]),
                 (ctypes.c_size_t * len(versions))(*versions), ctypes.c_size_t(len(parameters)),
                 (ctypes.c_void_p * len(prepared))(*[value.__chandle__() for value in prepared]),
                 ctypes.c_size_t(len(prepared)), ctypes.c_int(bool(returns_tuple)),
                 ctypes.c_size_t(num_results))

        def call(data):
            count = len(data)
            made = (ctypes.c_void_p * num_results)()
            status = function_call(function_handle, (ctypes.c_void_p * count)(
                *[array.handle.value for array in data]), ctypes.c_size_t(count), *after, made)
            if status == 1:
                return None
            if status != 0:
                mx.base.check_call(-1)   # raises MXNet's last error
            results = [ndarray(handle_type(handle)) for handle in made]
            return results if returns_tuple else results[0]
        call.kept = kept
        return call
    return tvm_caller


def _calls_rightly(tvm_caller):
    """Whether `tvm_caller` passes and reads tvm-ffi's values as this tvm-ffi lays them
    out: tvm-ffi's "ffi.Array" called on an NDArray and a TVM tensor gives both back,
    sharing their memory, and a parameter written since its version was read stops it."""
    data, parameter = mx.nd.arange(4), mx.nd.zeros((1,))
    prepared = tvm.runtime.tensor(np.arange(3, dtype="float32"))
    version = native.ndarray_versions([parameter])
    if version is None:
        return False
    call = tvm_caller(tvm_ffi.get_global_func("ffi.Array"), [parameter], version, [prepared], 2,
                      True)
    results = call([data])
    if results is None or results[0].shape != (4,) or results[1].shape != (3,):
        return False
    data[:] = 7
    parameter[:] = 1
    # results[0] shares data's memory but not its engine variable: reading it waits for
    # no write to data.
    data.wait_to_read()
    return results[0].asnumpy().tolist() == [7] * 4 and \
        results[1].asnumpy().tolist() == [0, 1, 2] and call([data]) is None


def _views_rightly(cpu_view):
    """Whether `cpu_view` tells an array on the CPU from one in shared memory as MXNet
    does: it reads the NDArray layout of the headers the library was built with,
    which must be this MXNet's (TVM would read another device's memory)."""
    array = mx.nd.ones((4,))
    address, capsule = cpu_view(array, 1)
    if capsule is None or address == 0:
        return False
    tvm.runtime.from_dlpack(capsule)       # consumed, as a compiled function's input is
    try:
        cpu_view(array.as_in_context(mx.Context("cpu_shared", 0)), 1)
    except ValueError:
        return True
    return False


cpu_view, ndarrays_of_tvm, tvm_caller = _exchange()
