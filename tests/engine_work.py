"""Work that holds MXNet's engine: a Python function pushed as an engine operation on
the CPU (MXEnginePushSyncND), run by the engine's CPU worker, which sleeps and then
notes that it ran. Until then the worker runs nothing else, as when a step's
backward keeps it busy: a call that waits for the engine returns only after it."""
import ctypes
import time

import mxnet as mx

LOG = []
_SYNC_FUNCTION = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
_KEEP_FOR_KERNELS = 7     # MXNet's FnProperty::kNoSkip


class _Context(ctypes.Structure):
    """MXNet's C++ Context, as MXEnginePushSyncND reads it."""
    _fields_ = [("dev_type", ctypes.c_int32), ("dev_id", ctypes.c_int32)]


def _hold(_run_context, _parameter):
    time.sleep(0.2)
    LOG.append("engine work done")


_HOLD = _SYNC_FUNCTION(_hold)
_CPU = _Context(1, 0)


def hold_the_engine():
    """Pushes the sleeping operation; the caller goes on at once."""
    mx.base.check_call(mx.base._LIB.MXEnginePushSyncND(   # pylint: disable=protected-access
        _HOLD, None, None, ctypes.byref(_CPU), None, 0, None, 0,
        ctypes.byref(ctypes.c_int(_KEEP_FOR_KERNELS)), 0, None))
