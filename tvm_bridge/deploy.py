"""Exporting a compiled function beside an MXNet export, and loading it back.

`export(fn, prefix)` writes prefix + "-tvm.so" and prefix + "-tvm.json" (input
names, shapes with symbolic dims as names, dtypes, output count) next to
MXNet's prefix-symbol.json / prefix-0000.params. Loading needs only tvm, mxnet
and runtime.py, which imports nothing from this project and can be copied.
"""
import os
import shutil

from .blas import link_options
from .runtime import load_library, write_manifest

LIBRARY_SUFFIX = "-tvm.so"
MANIFEST_SUFFIX = "-tvm.json"


def export(compiled, prefix):
    """Write `compiled` (a CompiledFunction) as a shared library plus manifest;
    returns (library path, manifest path)."""
    library, manifest = prefix + LIBRARY_SUFFIX, prefix + MANIFEST_SUFFIX
    directory = os.path.dirname(os.path.abspath(library))
    os.makedirs(directory, exist_ok=True)
    cached = compiled.info.get("library")
    if cached and os.path.exists(cached):
        # A library loaded back from disk cannot be exported again; copy the file.
        shutil.copyfile(cached, library)
    else:
        compiled.executable.export_library(library,
                                           options=link_options(compiled.signature.external))
    write_manifest(manifest, compiled.signature)
    return library, manifest


def load(prefix):
    """The CompiledFunction exported under `prefix`."""
    return load_library(prefix + LIBRARY_SUFFIX, prefix + MANIFEST_SUFFIX)


def standalone_loader_path():
    """runtime.py, the file to copy beside a deployment that runs without this package."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "runtime.py")
