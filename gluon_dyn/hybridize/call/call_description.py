"""A call's MXNet arrays and MXNet's modes, compared with another call's in one C call.

A call repeating the latest one a graph served (RepeatedCall in cache_key.py) needs
arrays of the same shapes, dtypes and contexts, in the same autograd training mode
and NumPy shape semantics. Read through MXNet's Python properties that is six C
calls for one array, a third of a small policy network's repeated call in
REINFORCE's episode loop; `CallMatch.matches` makes one
(src/ndarray/call_description.cc), and tells whether autograd records besides.
"""
import ctypes
import functools
import operator
import warnings

import mxnet as mx

from ... import native


def _library():
    """The library's description functions, ready to call; None, with a warning,
    where it has none (built from older sources)."""
    library = native.library_with("gluon_dyn_call_matches")
    if library is None:
        return None
    handles = ctypes.POINTER(ctypes.c_void_p)
    library.gluon_dyn_describe_call.restype = ctypes.c_int64
    library.gluon_dyn_describe_call.argtypes = [handles, ctypes.c_size_t,
                                                ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t,
                                                ctypes.POINTER(ctypes.c_int)]
    library.gluon_dyn_call_matches.restype = ctypes.c_int
    library.gluon_dyn_call_matches.argtypes = [handles, ctypes.c_size_t,
                                               ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t,
                                               ctypes.POINTER(ctypes.c_int)]
    mxnet = mx.base._LIB     # pylint: disable=protected-access
    library.gluon_dyn_use_mode_readers(*[ctypes.cast(function, ctypes.c_void_p) for function in (
        mxnet.MXAutogradIsRecording, mxnet.MXAutogradIsTraining, mxnet.MXIsNumpyShape)])
    return library


def _describes_rightly(library):
    """Whether the library tells arrays apart as MXNet's properties do: it reads the
    NDArray layout of the headers it was built with, which must be this MXNet's
    (a call matched wrongly would be served by another call's graph)."""
    match = CallMatch((mx.nd.zeros((2, 3)),), library)
    return match.matches((mx.nd.ones((2, 3)),))[0] and not any(
        match.matches((other,))[0] for other in (
            mx.nd.zeros((3, 2)), mx.nd.zeros((2, 3, 1)), mx.nd.zeros((2, 3), dtype="int32"),
            mx.nd.zeros((2, 3), ctx=mx.cpu(1))))


def _checked_library():
    library = _library()
    if library is not None and not _describes_rightly(library):
        warnings.warn("gluon_dyn: %s describes arrays wrongly (built for another MXNet?); %s"
                      % (native.LIBRARY_PATH, native.REBUILD))
        return None
    return library


class CallMatch:
    """The description of one call of MXNet arrays (`arrays`), made at once, and
    `matches(arrays)` for later calls. `of(arrays)` makes one, or gives None where
    the arrays are not all MXNet's or the library has no description."""

    @classmethod
    def of(cls, arrays):
        if _LIBRARY is None or not all(isinstance(array, mx.nd.NDArray) for array in arrays):
            return None
        return cls(arrays, _LIBRARY)

    def __init__(self, arrays, library):
        self._library = library
        self._types = tuple(map(type, arrays))
        self._count = len(arrays)
        # Kept: each call fills them rather than making them (the runner's lock
        # keeps calls of one block apart).
        self._handles = (ctypes.c_void_p * max(self._count, 1))()
        self._recording = ctypes.c_int()
        self._fill(arrays)
        length = self._describe(None, 0)
        self._expected = (ctypes.c_int64 * length)()
        self._describe(self._expected, length)
        self.training, self.np_shape = bool(self._expected[0]), bool(self._expected[1])
        self._matches = functools.partial(
            library.gluon_dyn_call_matches, self._handles, self._count, self._expected,
            length, ctypes.byref(self._recording))

    def matches(self, arrays):
        """(whether `arrays`, a call's arguments, are of the types, shapes, dtypes and
        contexts of the described call's, under the same training mode and NumPy
        shape semantics; whether autograd records)."""
        if type(arrays) is not tuple or len(arrays) != self._count or \
                not all(map(operator.is_, map(type, arrays), self._types)):
            return False, None
        self._fill(arrays)
        matched = self._matches()
        if matched < 0:
            raise RuntimeError("gluon_dyn: MXNet's autograd and NumPy modes could not be read")
        return matched == 1, bool(self._recording.value)

    def _fill(self, arrays):
        handles = self._handles
        for position, array in enumerate(arrays):
            handles[position] = array.handle

    def _describe(self, out, capacity):
        length = self._library.gluon_dyn_describe_call(self._handles, self._count, out, capacity,
                                                  ctypes.byref(self._recording))
        if length < 0:
            raise RuntimeError("gluon_dyn: MXNet's autograd and NumPy modes could not be read")
        return length


_LIBRARY = _checked_library()
