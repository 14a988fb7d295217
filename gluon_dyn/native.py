"""Python side of the gluon_dyn C++ operators (``libgluon_dyn_ops.so``).

Importing this module registers ``gluon_dyn_assert``, ``gluon_dyn_grad_tie``,
``gluon_dyn_split`` and ``gluon_dyn_concat`` with MXNet (as ``mx.nd.*`` and ``mx.sym.*``).
The helpers below hide the
attribute bookkeeping (input counts) and the difference between the
imperative (list of NDArray) and symbolic (grouped Symbol) multi-output forms.

Errors: a failed ``gluon_dyn_assert`` raises ``mxnet.base.MXNetError`` whose
text contains ``ASSERT_PREFIX + message``. Imperatively the op is queued on
MXNet's engine, so the error is raised where the result (or anything
depending on it) is read -- ``asnumpy()``, ``wait_to_read()``,
``mx.nd.waitall()`` -- not at the call.
"""
import ctypes
import os
import threading
import warnings

import mxnet as mx

LIBRARY_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            "_lib", "libgluon_dyn_ops.so")
ASSERT_OP = "gluon_dyn_assert"
GRAD_TIE_OP = "gluon_dyn_grad_tie"
# SliceChannel copying each part a contiguous run at a time (graphs MXNet runs only:
# hybridize/passes/equivalent_ops.py).
SPLIT_OP = "gluon_dyn_split"
# Concat the same way (_rnn_param_concat of a fused RNN's weights, equivalent_ops.py).
CONCAT_OP = "gluon_dyn_concat"
# Dropout drawing MXNet's numbers from MXNet's states (equivalent_ops.py).
DROPOUT_OP = "gluon_dyn_dropout"
# Identities that only make MXNet's backward request gradients: export drops them,
# and a parameter read only by them is not computed with.
TRAINING_ONLY_OPS = (GRAD_TIE_OP,)
# All of the above. MXNet 1.9.1 miscounts the shapes it hands an extension
# operator's shape function when an input's rank is unknown (c_api.cc sums the
# ranks, -1 for unknown, to size a buffer it then overruns, or fails to allocate):
# its shape inference must only see these operators with every input's rank known.
LIBRARY_OPS = (ASSERT_OP, GRAD_TIE_OP, SPLIT_OP, CONCAT_OP, DROPOUT_OP)
# The C++ op writes exactly this before the user's message.
ASSERT_PREFIX = "gluon_dyn assumption failed: "
REBUILD = "installing gluon_dyn builds it (`pip install .`, or `make setup` in a clone)"

_loaded = False
_load_lock = threading.Lock()


def load():
    """Registers the operators once per process; later calls do nothing."""
    global _loaded
    with _load_lock:
        if _loaded:
            return LIBRARY_PATH
        if not os.path.isfile(LIBRARY_PATH):
            raise ImportError("gluon_dyn native operator library not found at %s; %s"
                              % (LIBRARY_PATH, REBUILD))
        # MXNet accepts re-registering an op only once, so a second load of the
        # same library (e.g. after importlib.reload of this module) is skipped.
        if not (hasattr(mx.nd, ASSERT_OP) and hasattr(mx.sym, GRAD_TIE_OP)):
            mx.library.load(LIBRARY_PATH, verbose=False)
        _loaded = True
    return LIBRARY_PATH


load()


def library_with(name):
    """The library (ctypes) where it has the function `name`; else None, with a
    warning (a library built from older sources)."""
    library = ctypes.CDLL(LIBRARY_PATH)
    if not hasattr(library, name):
        warnings.warn("gluon_dyn: %s has no %s (built from older sources?); %s"
                      % (LIBRARY_PATH, name, REBUILD))
        return None
    return library


def _versions_reader():
    """`reader(arrays)`: a function giving, for each NDArray of `arrays`, the count of
    writes MXNet has completed to its memory (its engine variable's version; see
    src/ndarray/version.cc) once its pending writes are done, in one call, its
    handles gathered once (2.5 us of 3.6 for eight arrays); the caller keeps the
    arrays alive. None, with a warning, when the library cannot read them."""
    library = library_with("gluon_dyn_ndarray_versions")
    if library is None:
        return None
    function = library.gluon_dyn_ndarray_versions
    function.restype = ctypes.c_int
    function.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t,
                         ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p]
    wait_to_read = ctypes.cast(mx.base._LIB.MXNDArrayWaitToRead, ctypes.c_void_p)

    def reader(arrays):
        count = len(arrays)
        read = (ctypes.c_size_t * count)()
        handles = (ctypes.c_void_p * count)(*[array.handle.value for array in arrays])

        def versions():
            if function(handles, count, read, wait_to_read) != 0:
                mx.base.check_call(-1)   # raises the error MXNet's wait recorded
            return tuple(read)
        return versions

    # The reader follows the NDArray layout of the headers it was built with: check
    # that a write counts once, as it must if they match this MXNet.
    probe = mx.nd.zeros((1,))
    read_probe = reader([probe])
    (before,) = read_probe()
    probe[:] = 1
    if read_probe() != (before + 1,):
        warnings.warn("gluon_dyn: %s reads array versions wrongly (built for another MXNet?); %s"
                      % (LIBRARY_PATH, REBUILD))
        return None
    return reader


ndarray_versions_reader = _versions_reader()


def ndarray_versions(arrays):
    """The arrays' versions (ndarray_versions_reader), read once; None if unknown."""
    return None if ndarray_versions_reader is None else ndarray_versions_reader(arrays)()


def _namespace(F, arrays, what):
    """Returns mx.sym or mx.nd, after checking F and the arrays agree."""
    symbolic = [isinstance(a, mx.sym.Symbol) for a in arrays]
    if any(symbolic) and not all(symbolic):
        raise TypeError("%s: cannot mix Symbol and NDArray inputs" % what)
    is_sym = bool(symbolic) and symbolic[0]
    if F is not None and F not in (mx.sym, mx.nd):
        raise TypeError("%s: F must be mx.nd or mx.sym, got %r" % (what, F))
    if F is not None and arrays and (F is mx.sym) != is_sym:
        raise TypeError("%s: F is %s but the inputs are %s" % (
            what, F.__name__, "Symbols" if is_sym else "NDArrays"))
    if not arrays:
        is_sym = F is mx.sym
    return mx.sym if is_sym else mx.nd


def _outputs(result, count):
    """Splits an op result into a list of ``count`` outputs."""
    if isinstance(result, mx.sym.Symbol):
        return [result[i] for i in range(count)] if count > 1 else [result]
    if isinstance(result, (list, tuple)):
        return list(result)
    return [result]


def _via_identity(ns, *arrays):
    """`arrays` passed through MXNet's identity.

    lib_api hands an operator no OpReqType, so these operators always overwrite
    their input gradients; a leaf with grad_req='add' would lose what it had
    accumulated. Behind identity they write an intermediate gradient, and MXNet's
    own copy applies the requested write or add.
    """
    if ns is mx.nd and not mx.autograd.is_recording():
        return list(arrays)
    return [ns.identity(a) for a in arrays]


def assert_true(F, pred, *data, message):
    """Checks at run time that every element of ``pred`` is nonzero.

    Returns ``(pred_out, [data_out, ...])``: copies of the inputs that only
    exist once the check has passed, so consumers of them run after it. When
    the check fails the graph run fails with ``MXNetError`` containing
    ``ASSERT_PREFIX + message``. An empty ``pred`` passes.
    """
    if not isinstance(message, str):
        raise TypeError("assert_true: message must be a str, got %r" % (message,))
    ns = _namespace(F, (pred,) + data, "assert_true")
    result = getattr(ns, ASSERT_OP)(*_via_identity(ns, pred, *data),
                                    num_data=len(data), message=message)
    outs = _outputs(result, 1 + len(data))
    return outs[0], outs[1:]


def grad_tie(F, tied, anchors):
    """Identity on ``tied`` whose backward also gives every anchor a zero gradient.

    Returns a list with one output per tied array. Used so that MXNet requests
    (and so initialises) gradients it would otherwise leave as kNullOp, e.g.
    for ``_while_loop`` loop variables in MXNet 1.9.1: once any tied array or
    anchor needs a gradient, the gradients of all tied outputs are requested.
    """
    tied, anchors = list(tied), list(anchors)
    if len(tied) + len(anchors) <= 1:
        return tied
    ns = _namespace(F, tied + anchors, "grad_tie")
    result = getattr(ns, GRAD_TIE_OP)(*_via_identity(ns, *tied, *anchors), num_tied=len(tied),
                                      num_anchors=len(anchors))
    return _outputs(result, len(tied))
