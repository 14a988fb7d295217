"""Calling compiled TVM Relax functions with MXNet NDArrays, without copies.

This file imports only numpy, tvm and mxnet (nothing from gluon_dyn or
tvm_bridge), so it can be copied beside an exported model and loaded on its own:
`load_library(library_path, manifest_path)`.
"""
import atexit
import ctypes
import json
import operator
import os
import threading
import weakref

import mxnet as mx
import numpy as np
import tvm
from tvm import relax

# TVM's DLPack import refuses other addresses; such inputs are copied.
TVM_ALIGNMENT = 64
# 3: "external" (functions the library calls from the libraries of the mxnet wheel);
# 2: "num_data" (parameters prepared by PREPARE_FUNCTION); 1 had no preparation.
MANIFEST_FORMAT = 3
READABLE_MANIFEST_FORMATS = (1, 2, 3)
# The function compiler.py lifts the work on parameters into (Relax's name for it).
PREPARE_FUNCTION = "main_transform_params"

# [NDArray] -> a function giving, at each call, for each of them a number that
# changes whenever the array is written (MXNet's engine variable version, once its
# pending writes are done); None when there is no such reader: then parameters are
# prepared again at every call. tvm_bridge installs gluon_dyn's reader; a copy of
# this file deployed alone has none.
array_versions_reader = None
# `view(array, alignment)` -> (the NDArray's data address once its pending writes are
# done, a DLPack capsule viewing it or None where the address is not aligned so);
# ValueError where it is not on the CPU. tvm_bridge installs gluon_dyn's, one C call
# (ndarray_exchange.py); a copy of this file deployed alone uses _cpu_view.
ndarray_cpu_view = None
# [TVM tensor] -> [NDArray sharing its memory]; tvm_bridge installs gluon_dyn's, one
# C call for all (ndarray_exchange.py); a copy of this file deployed alone uses
# _ndarrays_of_tvm.
ndarrays_of_tvm = None
# `tvm_caller(function, parameters, versions, prepared, num_results, returns_tuple)` ->
# `call(data)`, a compiled function's whole call on its data NDArrays in one C call,
# or None (then the call is served as without it); tvm_bridge installs gluon_dyn's
# (ndarray_exchange.py); a copy of this file deployed alone has none.
tvm_caller = None


def configure_threads(default_threads=None):
    """Set TVM's thread pool size and binding before the pool first starts.

    TVM_NUM_THREADS defaults to `default_threads`, else the CPUs this process may
    use, and TVM_BIND_THREADS to 0; values already in the environment win. Only
    kernels big enough to gain run in parallel (see schedule_rules.py), so small
    ones pay no fork/join. With binding on, TVM pins the calling thread to CPU 0
    and every thread created later (MXNet's engine workers) inherits that mask.
    The pool reads these variables once, at its first parallel call, so later
    changes in the same process have no effect. Returns the thread count.
    """
    if default_threads is None:
        default_threads = len(os.sched_getaffinity(0))
    os.environ.setdefault("TVM_NUM_THREADS", str(int(default_threads)))
    os.environ.setdefault("TVM_BIND_THREADS", "0")
    return int(os.environ["TVM_NUM_THREADS"])


_external_libraries = {}  # file name -> the ctypes library, loaded once

# Every CompiledFunction, for _drop_views at exit.
_functions = weakref.WeakSet()


@atexit.register
def _drop_views():
    """Let go of the arrays the functions' views hold while Python still runs: an
    array made by `mx.nd.from_numpy(..., zero_copy=True)` is freed by a ctypes
    callback, which crashes the process when the last collection at exit runs it."""
    for function in list(_functions):
        function._views.clear()


def load_external(entries):
    """Make each {"library", "symbol"} of `entries` available to TVM libraries: the
    library (a file name, looked up in the mxnet package's folder, where libmxnet.so
    and the OpenBLAS it links are) loaded with its symbols global, and the symbol
    checked. ValueError/OSError naming the entry when it cannot be had.
    OpenBLAS's thread count is left alone: the wheel's (0.3.13, OpenMP) follows the
    calling thread's OpenMP setting (OMP_NUM_THREADS, else every CPU), and setting it
    would set that thread's OpenMP thread count for every other library too."""
    folder = os.path.dirname(os.path.abspath(mx.__file__))
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("library"), str) or \
                not isinstance(entry.get("symbol"), str):
            raise ValueError(f"an external function must name its library and symbol, "
                             f"got {entry!r}")
        name = entry["library"]
        if os.path.basename(name) != name or name in ("", ".", ".."):
            raise ValueError(f"external library {name!r}: a file name of the mxnet package "
                             f"is expected, not a path")
        library = _external_libraries.get(name)
        if library is None:
            path = os.path.join(folder, name)
            if not os.path.exists(path):
                raise OSError(f"external library {name}: {path} does not exist")
            library = _external_libraries[name] = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        if not hasattr(library, entry["symbol"]):
            raise OSError(f"external library {name} has no function {entry['symbol']}")


class InputSpec:
    """Name, shape (ints, or strings naming symbolic dims) and dtype of one input."""

    def __init__(self, name, shape, dtype):
        self.name, self.shape, self.dtype = name, tuple(shape), str(dtype)

    def to_json(self):
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}

    def __repr__(self):
        return f"InputSpec({self.name!r}, {self.shape}, {self.dtype!r})"


class Signature:
    """The inputs of a compiled function and how many arrays it returns.

    `num_data`: None, or the count of leading inputs that are data; the inputs
    after them are parameters, which the library's PREPARE_FUNCTION turns into
    what its "main" takes after the data (see CompiledFunction).
    `external`: the functions the library calls from the mxnet wheel's libraries,
    each {"library": file name, "symbol": name} (load_external).
    """

    def __init__(self, inputs, num_outputs, returns_tuple=True, num_data=None, external=()):
        self.inputs = list(inputs)
        self.num_outputs = int(num_outputs)
        self.returns_tuple = bool(returns_tuple)
        self.num_data = None if num_data is None else int(num_data)
        self.external = list(external)

    def to_json(self):
        data = {"inputs": [spec.to_json() for spec in self.inputs],
                "num_outputs": self.num_outputs, "returns_tuple": self.returns_tuple,
                "external": self.external}
        if self.num_data is not None:
            data["num_data"] = self.num_data
        return data

    @classmethod
    def from_json(cls, data):
        inputs = [InputSpec(d["name"], d["shape"], d["dtype"]) for d in data["inputs"]]
        return cls(inputs, data["num_outputs"], data.get("returns_tuple", True),
                   data.get("num_data"), data.get("external", ()))

    def check(self, arrays):
        """Raise ValueError/TypeError naming the first input that does not fit."""
        if len(arrays) != len(self.inputs):
            names = ", ".join(spec.name for spec in self.inputs)
            raise TypeError(f"expected {len(self.inputs)} inputs ({names}), got {len(arrays)}")
        bound = {}  # symbolic dim name -> (value, where it was bound)
        for index, (spec, array) in enumerate(zip(self.inputs, arrays)):
            where = f"input {index} '{spec.name}'"
            if not isinstance(array, (mx.nd.NDArray, np.ndarray)):
                raise TypeError(f"{where}: expected an mxnet NDArray or numpy array, "
                                f"got {type(array).__name__}")
            dtype = _dtype_name(array.dtype)
            if dtype != spec.dtype:
                raise ValueError(f"{where}: expected dtype {spec.dtype}, got {dtype}")
            shape = tuple(array.shape)
            if len(shape) != len(spec.shape):
                raise ValueError(f"{where}: expected {len(spec.shape)} dims {spec.shape}, "
                                 f"got {len(shape)} dims {shape}")
            for axis, (want, got) in enumerate(zip(spec.shape, shape)):
                if isinstance(want, int):
                    if want != got:
                        raise ValueError(f"{where} dim {axis}: expected {want}, got {got}")
                elif want in bound and bound[want][0] != got:
                    value, first = bound[want]
                    raise ValueError(f"{where} dim {axis}: '{want}' is {value} in {first}, "
                                     f"got {got}")
                else:
                    bound.setdefault(want, (got, where))


_DTYPE_NAMES = {}  # numpy type or dtype -> "float32"; np.dtype(...).name costs 4 us a call


def _dtype_name(dtype):
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = np.dtype(dtype).name
    return name


def _versions_reader(arrays):
    """A function giving the arrays' write counts (see array_versions_reader), or None
    if unknown."""
    if array_versions_reader is None or \
            not all(isinstance(array, mx.nd.NDArray) for array in arrays):
        return None
    return array_versions_reader(arrays)


def as_ndarrays(tensors):
    """TVM's tensors as NDArrays sharing their memory."""
    return (ndarrays_of_tvm or _ndarrays_of_tvm)(tensors)


def _ndarrays_of_tvm(tensors):
    """ndarrays_of_tvm through MXNet's and TVM's Python APIs."""
    return [mx.nd.from_dlpack(tensor.__dlpack__()) for tensor in tensors]


def _cpu_view(array, alignment):
    """ndarray_cpu_view through MXNet's Python API."""
    if array.context.device_type != "cpu":
        raise ValueError(f"arrays must be on the CPU, got one on {array.context}")
    # The address first, so that a capsule TVM would refuse is never made.
    address = _mx_data_address(array)
    return address, mx.nd.to_dlpack_for_read(array) if address % alignment == 0 else None


def _mx_data_address(array):
    """Where the array's data is, once MXNet's pending writes to it are done.
    MXNDArrayGetData allocates an array whose memory is still deferred (the
    outputs of a static_alloc CachedOp until their operator runs) and re-lays out
    a oneDNN-blocked one: called while the engine thread runs the operator writing
    the array, both threads allocated, and TVM read memory the operator never
    wrote (about 1 call in 4000 with an MXNet segment between TVM segments)."""
    array.wait_to_read()
    address = ctypes.c_void_p()
    mx.base.check_call(mx.base._LIB.MXNDArrayGetData(array.handle, ctypes.byref(address)))
    return address.value or 0


class CompiledFunction:
    """A compiled Relax function called with MXNet NDArrays (or numpy arrays, or TVM
    tensors, which it takes as they are).

    Inputs go to TVM through DLPack without copies when 64-byte aligned and
    contiguous; otherwise they are copied once and `copies` counts them. A data
    input is copied into a buffer kept for its position and refilled at each call
    (~3 us for a small batch, against ~20 us for a new TVM tensor); an output that
    shares such a buffer's memory (a function returning its input, or a view of
    it) is copied out of it before the call returns, and a call made while another
    thread runs the function copies into new tensors.
    An NDArray passed again at the same position (an input the caller refills
    in place) reuses its DLPack view once MXNet's pending writes are done and
    its memory is checked to be where the view points, in the plain layout
    (~2 us instead of ~12 us per array).
    Parameters (the inputs after `signature.num_data`) are prepared by
    PREPARE_FUNCTION (transposed, packed) and the results kept: they are
    prepared again when a parameter is another array or its version
    (`array_versions_reader`) changed (every write MXNet completes counts:
    optimizer steps, set_data, `p.data()[:] = ...`, load_parameters);
    `preparations` counts the runs.
    Outputs come back as MXNet NDArrays sharing TVM's memory. A function that
    returns a tuple gives a list, one that returns a tensor gives one NDArray.
    With `tvm_caller` installed, a call whose data are NDArrays TVM can view and whose
    parameters are those last prepared, unchanged, is made in one C call (the views,
    the parameters' check, the call and its results as NDArrays: ~10 us less for a
    small policy network); `native_calls` counts them.
    `info` holds how it was made (compile time, cache hit, tuning), if known.
    """

    def __init__(self, executable, signature, function_name="main", info=None):
        configure_threads()  # before this VM can start TVM's thread pool
        self.signature = signature
        self.executable = executable
        self._vm = relax.VirtualMachine(executable, tvm.cpu())
        self._function = self._vm[function_name]
        self._num_data = signature.num_data
        self._prepare = None if self._num_data is None else self._vm[PREPARE_FUNCTION]
        self._prepared = self._prepared_from = None
        self.preparations = 0
        self.copies = 0
        # Data input position -> (TVM tensor, its memory's start, end, (shape, dtype)).
        self._staging = {}
        self._staging_lock = threading.Lock()
        self.info = dict(info or {})
        # Input position -> (the NDArray, its TVM view, its data address), kept
        # alive together so that `is` identifies the same array.
        self._views = {}
        # (The parameter arrays it is for, tvm_caller's call), made at each preparation.
        self._native = None
        self.native_calls = 0
        _functions.add(self)

    def __call__(self, *arrays):
        self.signature.check(arrays)
        return self.call_unchecked(*arrays)

    def call_unchecked(self, *arrays):
        """The call without the signature check, for callers that guarantee the
        inputs fit (a plan fed by a graph cache keyed on shapes and dtypes); a
        misfit is still caught by TVM's own checks, less readably."""
        results = self._call_natively(arrays)
        if results is not None:
            return results
        result = self.call_tvm(*arrays)
        if not self.signature.returns_tuple:
            return as_ndarrays([result])[0]
        return as_ndarrays(result)

    def _call_natively(self, arrays):
        """The call through tvm_caller (its results), or None where this class's own
        path is to serve it: no such call for these parameters yet, data other than
        NDArrays, or tvm_caller's own reasons."""
        if tvm_caller is None:
            return None
        if self._native is None and self._prepare is None:
            self._native = ([], tvm_caller(self._function, (), (), (), self.signature.num_outputs,
                                           self.signature.returns_tuple))
        if self._native is None:
            return None
        parameters, call = self._native
        count = len(arrays) - len(parameters)
        if count < 0 or not all(map(operator.is_, arrays[count:], parameters)) or \
                not all(isinstance(array, mx.nd.NDArray) for array in arrays[:count]):
            return None
        results = call(arrays[:count])
        if results is not None:
            self.native_calls += 1
        return results

    def call_tvm(self, *arrays):
        """call_unchecked giving TVM's own tensors (a tuple's as a list), for a caller
        that passes them on to compiled functions (which take them as they are) or
        to numpy, not to MXNet."""
        staging = self._staging_lock.acquire(blocking=False)
        try:
            data = arrays if self._prepare is None else arrays[:self._num_data]
            views = [self._view(position, array, staging) for position, array in enumerate(data)]
            if self._prepare is None:
                result = self._function(*views)
            else:
                result = self._function(*views, *self._parameters(arrays[self._num_data:]))
            # A slice of TVM's Array is made in one call, list() calls per item.
            results = result[:] if self.signature.returns_tuple else [result]
            if staging and self._staging:
                results = [self._out_of_staging(tensor) for tensor in results]
        finally:
            if staging:
                self._staging_lock.release()
        return results if self.signature.returns_tuple else results[0]

    def _out_of_staging(self, tensor):
        """`tensor`, or a copy of it where it shares the memory of a staging buffer,
        which the next call refills."""
        address = tensor.data_ptr()
        for _, start, end, _ in self._staging.values():
            if start <= address < max(end, start + 1):
                return tvm.runtime.tensor(tensor.numpy())
        return tensor

    def _parameters(self, arrays):
        """What "main" takes after the data: the prepared parameters, prepared
        again unless every array is the one they came from, unchanged since."""
        previous = self._prepared_from
        if previous is None or previous[2] is None or len(arrays) != len(previous[0]) or \
                not all(map(operator.is_, arrays, previous[0])) or previous[2]() != previous[1]:
            self._prepared = list(self._prepare([self._to_tvm(array) for array in arrays]))
            # Stamped after the views: taking one re-lays out a weight oneDNN had
            # blocked, a write that would otherwise make the next call prepare again.
            read_versions = _versions_reader(arrays)
            self._prepared_from = (list(arrays), read_versions and read_versions(),
                                   read_versions)
            self.preparations += 1
            self._native = None
            if tvm_caller is not None and read_versions is not None and \
                    all(isinstance(value, tvm.runtime.Tensor) for value in self._prepared):
                self._native = (list(arrays), tvm_caller(
                    self._function, arrays, self._prepared_from[1], self._prepared,
                    self.signature.num_outputs, self.signature.returns_tuple))
        return self._prepared

    def _view(self, position, array, staging=False):
        if isinstance(array, tvm.runtime.Tensor):
            return array
        cached = self._views.get(position)
        if cached is not None and cached[0] is array:
            # MXNDArrayGetData first turns a oneDNN-blocked array (MXNet reorders
            # weights for its own kernels) back to the plain layout; the view is
            # still the array only where that left the memory where it was.
            if _mx_data_address(array) == cached[2]:
                return cached[1]
        view, viewed_address = self._tvm_tensor(array, position if staging else None)
        if viewed_address is not None:
            self._views[position] = (array, view, viewed_address)
        return view

    def _to_tvm(self, array, staging_position=None):
        """A TVM tensor of `array`: a view where TVM takes its memory, else a copy (in
        the staging buffer of `staging_position`, if given)."""
        return self._tvm_tensor(array, staging_position)[0]

    def _tvm_tensor(self, array, staging_position):
        """(_to_tvm's tensor, the address of the NDArray's memory it views, or None
        where it is a copy or `array` is NumPy's)."""
        if isinstance(array, mx.nd.NDArray):
            address, dlpack = (ndarray_cpu_view or _cpu_view)(array, TVM_ALIGNMENT)
            if dlpack is not None:
                return tvm.runtime.from_dlpack(dlpack), address
        elif array.flags.c_contiguous and array.ctypes.data % TVM_ALIGNMENT == 0:
            return tvm.runtime.from_dlpack(array), None
        self.copies += 1
        if staging_position is None:
            return tvm.runtime.tensor(np.ascontiguousarray(
                array.asnumpy() if isinstance(array, mx.nd.NDArray) else array)), None
        view, start, end = self._staging_buffer(staging_position, array.shape, array.dtype)
        if not isinstance(array, mx.nd.NDArray):
            array = np.ascontiguousarray(array)
            address = array.ctypes.data
        ctypes.memmove(start, address, end - start)
        return view, None

    def _staging_buffer(self, position, shape, dtype):
        """(The TVM tensor kept for data input `position`, where its memory starts
        and ends), made anew when the shape or dtype differs. TVM allocates it: a
        NumPy array held by a TVM tensor would be freed from TVM at exit, after
        Python's own teardown."""
        kept = self._staging.get(position)
        if kept is None or kept[3] != (shape, dtype):
            view = tvm.runtime.empty(tuple(shape), _dtype_name(dtype))
            start = view.data_ptr()
            kept = self._staging[position] = (
                view, start, start + int(np.prod(shape)) * np.dtype(dtype).itemsize,
                (shape, dtype))
        return kept[:3]

def read_manifest(manifest_path):
    with open(manifest_path) as f:
        manifest = json.load(f)
    if manifest.get("format") not in READABLE_MANIFEST_FORMATS:
        raise ValueError(f"{manifest_path}: unknown manifest format {manifest.get('format')!r}, "
                         f"this loader reads formats {READABLE_MANIFEST_FORMATS}")
    return manifest


def write_manifest(manifest_path, signature, **extra):
    manifest = {"format": MANIFEST_FORMAT, **signature.to_json(), **extra}
    temporary = f"{manifest_path}.{os.getpid()}.tmp"
    with open(temporary, "w") as f:
        json.dump(manifest, f, indent=1)
    os.replace(temporary, manifest_path)


def load_library(library_path, manifest_path, info=None):
    """A CompiledFunction from an exported shared library and its JSON manifest."""
    for path in (library_path, manifest_path):
        if not os.path.exists(path):
            raise FileNotFoundError(f"compiled TVM function: {path} does not exist")
    manifest = read_manifest(manifest_path)
    signature = Signature.from_json(manifest)
    load_external(signature.external)  # before the library that calls them
    executable = tvm.runtime.load_module(library_path)
    return CompiledFunction(executable, signature, manifest.get("function", "main"), info)
