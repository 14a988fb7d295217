"""MXNet NDArrays handed to TVM and TVM's results handed back, sharing memory through
DLPack, one C call each way (src/ndarray/dlpack_exchange.cc, in gluon_dyn's native
library). runtime.py does the same through MXNet's and TVM's Python APIs where these
are not installed, as in a deployment without gluon_dyn."""
import ctypes
import warnings

import mxnet as mx
import tvm
from tvm_ffi import libinfo

from gluon_dyn import native

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
    tvm_ffi = ctypes.CDLL(libinfo.find_libtvm_ffi())
    library.gluon_dyn_use_exchange_functions(*[ctypes.cast(used, ctypes.c_void_p) for used in (
        mxnet.MXNDArrayWaitToRead, mxnet.MXNDArrayGetData, mxnet.MXNDArrayToDLPack,
        mxnet.MXNDArrayFromDLPackEx, mxnet.MXNDArrayFree, tvm_ffi.TVMFFITensorToDLPack)])
    return library


def _exchange():
    """(cpu_view, ndarrays_of_tvm) below, or (None, None) without the library."""
    library = _library()
    if library is None:
        return None, None
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
        return None, None
    return cpu_view, ndarrays_of_tvm


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


cpu_view, ndarrays_of_tvm = _exchange()
