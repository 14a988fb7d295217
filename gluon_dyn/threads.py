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
"""
import ctypes
import os

import mxnet as mx


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
