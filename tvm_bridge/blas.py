"""The BLAS inside the mxnet wheel (OpenBLAS, mxnet/libopenblas.so.0), as TVM kernels call it.

The apache-tvm wheel registers no BLAS of its own; libmxnet.so links the OpenBLAS
shipped beside it, so every process that runs a plan has it loaded already. Kernels
routed to it (external_gemms.py) call `cblas_sgemm` directly from their compiled
code. The libraries holding them are linked against it (`link_options`), so that the
dynamic loader resolves the symbol when TVM loads them (from the copy already in
the process, matched by its soname); their manifests list it (`external_entry`),
and runtime.load_external (the C runtime: src/runtime/libraries.cc) makes it global
before they load, which the code TVM compiles in memory needs too. Its OpenMP
threads follow the calling thread's OpenMP setting (see load_external).
"""
import os

import mxnet as mx

from .runtime import load_external

LIBRARY = "libopenblas.so.0"
SYMBOL = "cblas_sgemm"
# cblas.h's enums.
ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112


def library_dir():
    """The mxnet package's folder, where its OpenBLAS is."""
    return os.path.dirname(os.path.abspath(mx.__file__))


def external_entry():
    """What a manifest lists for a library calling SYMBOL."""
    return {"library": LIBRARY, "symbol": SYMBOL}


def load():
    """OpenBLAS loaded as runtime.load_external does for a library that calls it."""
    load_external([external_entry()])


def link_options(external):
    """Linker options of a library calling the `external` functions of its Signature
    (none, or SYMBOL). TVM puts options before the objects, where an --as-needed
    linker would drop the library as unused yet."""
    if not external:
        return []
    return ["-L" + library_dir(), "-Wl,--no-as-needed", "-l:" + LIBRARY,
            "-Wl,-rpath," + library_dir()]
