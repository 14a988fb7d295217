"""NumPy values as new NDArrays, made without waiting for MXNet's engine.

mx.nd.array and MXNet's other copies from NumPy wait for the engine to run the
operators already queued before the copy (a graph's backward, say): in a step whose
Python runs ahead of its operators that wait serializes the two. A new array's
memory is nobody else's, so on the CPU the values are written straight into it.
"""
import ctypes

import mxnet as mx
import numpy as np
from mxnet.base import _LIB, NDArrayHandle, check_call

_MX_DTYPES = mx.ndarray.ndarray._DTYPE_NP_TO_MX     # pylint: disable=protected-access
_CPU = mx.cpu().device_typeid


def host_array(values, context=None):
    """`values` (NumPy data, made for this call) as a new NDArray on `context`
    (default: the current context), made through the C API: allocated at once, and
    on the CPU written without the engine."""
    values = np.asarray(values, order="C")    # (ascontiguousarray makes a 0-d array 1-d)
    context = context or mx.context.current_context()
    if values.ndim == 0 or values.size == 0 or values.dtype.type not in _MX_DTYPES:
        # MXNet's legacy shapes: no dimensions, or a 0, is "unknown" to the C API; a
        # dtype MXNet has not is its own error.
        return mx.nd.array(values, ctx=context, dtype=values.dtype)
    handle = NDArrayHandle()
    check_call(_LIB.MXNDArrayCreateEx(
        (ctypes.c_uint * values.ndim)(*values.shape), values.ndim, context.device_typeid,
        context.device_id, 0, _MX_DTYPES[values.dtype.type], ctypes.byref(handle)))
    array = mx.nd.NDArray(handle)    # owns the handle from here, also if a call below fails
    if context.device_typeid == _CPU:
        memory = ctypes.c_void_p()
        check_call(_LIB.MXNDArrayGetData(handle, ctypes.byref(memory)))
        ctypes.memmove(memory, values.ctypes.data, values.nbytes)
    else:
        check_call(_LIB.MXNDArraySyncCopyFromCPU(handle, values.ctypes.data_as(ctypes.c_void_p),
                                                 ctypes.c_size_t(values.size)))
    return array
