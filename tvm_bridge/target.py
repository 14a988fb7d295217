"""The local CPU as a TVM target, and TVM's thread settings for sharing it with MXNet."""
import tvm
from tvm.target import codegen

from .runtime import configure_threads


def host_target(num_cores=None):
    """llvm for this machine's CPU (LLVM's host CPU name, e.g. "znver3").

    num-cores defaults to TVM's thread count (see configure_threads): the
    kernels run with that many threads, and meta-schedule sizes parallel loops by it.
    """
    threads = configure_threads()
    cores = int(num_cores) if num_cores is not None else threads
    if cores < 1:
        raise ValueError(f"num_cores must be at least 1, got {cores}")
    return tvm.target.Target({"kind": "llvm", "mcpu": codegen.llvm_get_system_cpu(),
                              "num-cores": cores})


def target_json(target):
    """A stable text form of a target, for cache keys."""
    return str(target if isinstance(target, tvm.target.Target) else tvm.target.Target(target))
