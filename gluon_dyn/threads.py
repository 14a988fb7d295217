"""OpenMP threads of MXNet's operators: many for the engine, one for the caller.

MXNet 1.9.1 runs its operators on engine threads, each with an OpenMP team of
MXNET_OMP_MAX_THREADS (or OMP_NUM_THREADS) threads; unset, half the CPUs, on the
assumption that every core runs two hardware threads. A thread that calls MXNet
(Python's) runs OpenMP regions of its own too: `asnumpy` of an array of more than
200,000 elements copies it in parallel. That makes a second team, and once a
process's OpenMP threads outnumber its CPUs, GNU OpenMP lets idle threads spin
only briefly before they sleep, so every later operator region wakes its team
through the kernel: on 2 CPUs with 2 threads per operator, one `asnumpy` of a
weight's gradient made a hidden-512 LSTM's training step 8x slower (42 to 338 ms),
for the rest of the process. The calling thread's own regions are short copies:
`serial_caller()` gives that thread a team of one, so only the engine's team runs
wide.

An engine team is worth waking for large arrays only. In a call that runs graph after
graph of arrays of at most SMALL_ARRAY elements (the recursion engine's groups of
small trees) while the Python thread prepares the next, the team's wake-ups and
spinning cost more than the kernels, on the critical path: the corpus's Tree-LSTM
ran new trees 15% faster with its graphs on one thread (benchmarks/serial_graphs.py:
2.44 against 2.82 ms). A graph timed alone gains nothing (its kernels run as fast;
the two engine functions cost it 10%, 0.005 ms), and one thread's kernels fall
behind beyond a few thousand elements (20% slower at 4,096, 40% at 32,768).
`run_graph` runs such a graph's operators on one thread, in a GraphSpan's
region: engine functions pushed before and after it (src/engine/serial_regions.cc)
set the engine thread's OpenMP count and give it back. The end reads the graph's
outputs, so the engine runs it after their operators, and runs it even when one
of them failed (MXNet's kNoSkip); that ordering holds where one engine thread
runs a context's operators (MXNet's default ThreadedEnginePerDevice with one CPU
worker, or NaiveEngine): elsewhere graphs run as they are.

The other way round, a training step of few long operators runs faster with every
core: the LSTM LM of examples/train (MXNet's fused RNN operator, 10 of its 13 ms a
step on one thread) trained 23% faster with its graphs' operators on both cores of a
2-core machine, while LeNet, the GAN, CartPole and the tree models trained 6-32%
slower (their Python pushing the next operators needs the second core). A wide
region (`begin_all_cores`, `end_all_cores`) gives the engine thread every core
until it ends; training/wide_steps.py opens one where a fused trainer measured its
steps faster so. Only operators that size their team by the thread's OpenMP count
widen (oneDNN's: RNN, FullyConnected, Convolution); MXNet's own kernels keep the
count MXNET_OMP_MAX_THREADS's default gives them.
"""
import ctypes
import os
import threading

import mxnet as mx

from . import native

SMALL_ARRAY = 1024      # elements: a graph whose arrays are all this small runs serially
_NO_SKIP = ctypes.c_int(7)   # MXNet's FnProperty::kNoSkip


def serial_caller():
    """The calling thread's OpenMP regions run on one thread (the engine's keep theirs)."""
    # pylint: disable=protected-access
    mx.base.check_call(mx.base._LIB.MXSetNumOMPThreads(ctypes.c_int(1)))


def cores():
    """The physical cores among the CPUs this process may run on (hardware threads
    of one core count once)."""
    seen = set()
    for cpu in os.sched_getaffinity(0):
        path = "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list" % cpu
        try:
            with open(path) as siblings:
                seen.add(siblings.read().strip())
        except OSError:
            seen.add(str(cpu))
    return len(seen)


class _CPUContext(ctypes.Structure):
    """MXNet's C++ Context (as MXEnginePushSync reads it)."""
    _fields_ = [("dev_type", ctypes.c_int32), ("dev_id", ctypes.c_int32)]


def _engine_runs_a_context_on_one_thread(environ):
    engine = environ.get("MXNET_ENGINE_TYPE", "ThreadedEnginePerDevice")
    return engine == "NaiveEngine" or (engine == "ThreadedEnginePerDevice" and
                                       environ.get("MXNET_CPU_WORKER_NTHREADS", "1") == "1")


class _SerialRegions:
    """The engine functions of src/engine/serial_regions.cc, pushed on the CPU."""

    def __init__(self, library):
        self.begin = ctypes.cast(library.gluon_dyn_serial_begin, ctypes.c_void_p)
        self.end = ctypes.cast(library.gluon_dyn_serial_end, ctypes.c_void_p)
        self.threads = ctypes.cast(library.gluon_dyn_omp_threads, ctypes.c_void_p)
        self.wide_begin = ctypes.cast(library.gluon_dyn_wide_begin, ctypes.c_void_p)
        self.wide_end = ctypes.cast(library.gluon_dyn_wide_end, ctypes.c_void_p)
        # Read by the engine thread when a wide region begins: kept for the process.
        self.all_cores = ctypes.c_int(cores())
        # Written (in name only) by every wide begin and end, so that the engine runs
        # them in the order they were pushed: a step's begin, reading nothing, would
        # otherwise run before the previous step's end, still waiting for its gradients.
        self.wide_order = mx.nd.zeros((1,))
        self.context = _CPUContext(1, 0)

    def push(self, function, reads=(), parameter=None, writes=()):
        handles = (ctypes.c_void_p * len(reads))(*[array.handle.value for array in reads])
        written = (ctypes.c_void_p * len(writes))(*[array.handle.value for array in writes]) \
            if writes else None      # serial regions push none, once per recursion call
        # pylint: disable=protected-access
        mx.base.check_call(mx.base._LIB.MXEnginePushSyncND(
            function, parameter, None, ctypes.byref(self.context), handles, len(reads),
            written, len(writes), ctypes.byref(_NO_SKIP), 0, None))


def _serial_regions():
    library = ctypes.CDLL(native.LIBRARY_PATH)
    if not hasattr(library, "gluon_dyn_wide_begin") or \
            not _engine_runs_a_context_on_one_thread(os.environ):
        return None
    return _SerialRegions(library)


_REGIONS = _serial_regions()
_spans = threading.local()     # .current: the innermost GraphSpan of the thread


def serial_graphs_available():
    """Whether `run_graph` runs graphs on one thread here (module doc)."""
    return _REGIONS is not None


def begin_one_thread():
    """Operators the engine runs after this (on the CPU) get one OpenMP thread,
    until as many end_one_thread calls (regions nest)."""
    _REGIONS.push(_REGIONS.begin)


def end_one_thread(reads=()):
    """Ends a region, once the operators making the NDArrays `reads` have run."""
    _REGIONS.push(_REGIONS.end, reads)


def run_graph(run, one_thread, reads):
    """`run()`'s results (a list of NDArrays; `run` pushes a graph reading the
    NDArrays `reads`), its operators on one thread when `one_thread`, in the
    current GraphSpan's region: opened at the span's first such graph, ended for
    good before a graph that is not to run on one thread (a GAN's training steps
    switched between the two ran slower than either). Outside a span, as it is."""
    span = getattr(_spans, "current", None)
    if span is not None:
        if one_thread and not span.open and not span.ended:
            begin_one_thread()
            span.open = True
        elif not one_thread and span.open:
            end_one_thread(reads)
            span.open, span.ended = False, True
    return run()


class GraphSpan:
    """Graphs run one after the other (a recursion engine's call: its groups, and
    the operators between them), in one region from the first that runs on one
    thread to the end of the span (or to a graph that does not): a region per
    graph would leave the operators between them (and the engine function's own
    cost, ~7 us a push) to the wide team. The region ends after `outputs` (set
    them before the span ends) are made."""

    def __init__(self):
        self.open = self.ended = False
        self.outputs, self._outer = [], None

    def __enter__(self):
        self._outer = getattr(_spans, "current", None)
        _spans.current = self
        return self

    def __exit__(self, *failure):
        _spans.current = self._outer
        if self.open:
            end_one_thread(self.outputs)
            self.open = False


def all_cores_available(environ=os.environ):
    """Whether wide regions can give the engine more threads than MXNet does: regions
    are pushed here (serial_graphs_available), the user left MXNet's thread count
    to its default (no MXNET_OMP_MAX_THREADS nor OMP_NUM_THREADS: a count set there
    is kept) and there is more than one core."""
    return _REGIONS is not None and cores() > 1 and \
        not any(name in environ for name in ("MXNET_OMP_MAX_THREADS", "OMP_NUM_THREADS"))


class _WideRegion:
    open = False        # pushed and not yet ended (one engine thread runs the CPU's operators)


def begin_all_cores():
    """Operators the engine runs after this (on the CPU) size their OpenMP team for
    every core, until end_all_cores; no-op in an open region."""
    if not _WideRegion.open:
        _REGIONS.push(_REGIONS.wide_begin, (), ctypes.cast(ctypes.byref(_REGIONS.all_cores),
                                                           ctypes.c_void_p),
                      (_REGIONS.wide_order,))
        _WideRegion.open = True


def end_all_cores(reads=()):
    """Ends the open wide region, if any, once the operators making the NDArrays
    `reads` have run (an engine function reading nothing runs as soon as the engine
    thread is free, ahead of operators still waiting for their inputs)."""
    if _WideRegion.open:
        _REGIONS.push(_REGIONS.wide_end, reads, writes=(_REGIONS.wide_order,))
        _WideRegion.open = False


def engine_omp_threads():
    """The OpenMP threads an operator the engine runs now is given (its CPU
    thread's count), once the operators pushed so far have run."""
    mx.nd.waitall()
    threads = ctypes.c_int(0)
    _REGIONS.push(_REGIONS.threads, (), ctypes.cast(ctypes.pointer(threads), ctypes.c_void_p))
    mx.nd.waitall()
    return threads.value
