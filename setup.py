"""Builds gluon_dyn's C++ library (the operators of src/operator/control_flow/ and
the array version reader of src/ndarray/) into gluon_dyn/_lib/libgluon_dyn_ops.so,
where gluon_dyn/native.py loads it from.
Metadata and pinned dependencies are in pyproject.toml; build_support/backend.py
makes pip install the pinned mxnet for the build.
"""
import concurrent.futures
import copy
import glob
import importlib.util
import os

from setuptools import Extension, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_ext import build_ext

# pip's build outputs stay out of the folder other parts of the project build into.
BUILD_BASE = os.path.join("build", "python")


def mxnet_dir():
    """The installed mxnet package's folder (found without importing mxnet)."""
    spec = importlib.util.find_spec("mxnet")
    folder = spec.submodule_search_locations[0] if spec else None
    if folder is None or not os.path.isfile(os.path.join(folder, "include", "mxnet",
                                                         "lib_api.h")):
        raise RuntimeError(
            "building gluon_dyn's operator library needs lib_api.h from the mxnet wheel, and "
            "%s: install the pinned mxnet first (pip does so itself unless given "
            "--no-build-isolation)" % ("this mxnet has none" if folder else "mxnet is not "
                                       "installed"))
    return folder


class OperatorLibraryBuild(build_ext):
    """Compiles and links the library against the mxnet wheel's extension API:
    its header and lib_api.cc, which every MXNet extension library compiles in."""

    def build_extension(self, ext):
        mxnet = mxnet_dir()
        # Added for this build only: setuptools lists ext.sources afterwards too
        # (editable installs), and they must be paths inside the project.
        ext = copy.copy(ext)
        # src/ndarray/ reads MXNet's NDArray through its C++ header, whose layout
        # depends on whether the wheel was built with oneDNN (its headers ship then);
        # mshadow must not look for a cblas.h.
        onednn = os.path.isdir(os.path.join(mxnet, "include", "mkldnn"))
        ext.include_dirs = ext.include_dirs + [os.path.join(mxnet, "include"),
                                               os.path.join(mxnet, "include", "mkldnn")]
        ext.define_macros = ext.define_macros + [
            ("MXNET_USE_MKLDNN", str(int(onednn))), ("MSHADOW_USE_CBLAS", "0"),
            ("MSHADOW_USE_MKL", "0"), ("MSHADOW_USE_CUDA", "0"), ("DMLC_USE_CXX11", "1")]
        ext.sources = ext.sources + [os.path.join(mxnet, "src", "lib_api.cc")]
        compile_sources = self.compiler.compile

        def compile_in_parallel(sources, *args, **kwargs):
            # lib_api.cc alone takes as long as our sources together.
            with concurrent.futures.ThreadPoolExecutor(os.cpu_count()) as pool:
                objects = pool.map(lambda source: compile_sources([source], *args, **kwargs),
                                   sources)
                return [obj for one in objects for obj in one]
        self.compiler.compile = compile_in_parallel
        try:
            super().build_extension(ext)
        finally:
            self.compiler.compile = compile_sources

    def copy_extensions_to_source(self):
        # Editable installs copy the library into the source tree, into a folder
        # that is no package, so nothing else creates it.
        for ext in self.extensions:
            os.makedirs(os.path.dirname(self.get_ext_filename(ext.name)), exist_ok=True)
        super().copy_extensions_to_source()

    def get_ext_filename(self, fullname):
        # A library MXNet loads (mx.library.load), not a Python module: no ABI suffix.
        return os.path.join(*fullname.split(".")) + ".so"


class PythonIndependentWheel(bdist_wheel):
    """The library calls MXNet's C API only, never Python's: one wheel serves every
    Python 3 on the platform."""

    def get_tag(self):
        return ("py3", "none", super().get_tag()[2])


setup(
    ext_modules=[Extension(
        "gluon_dyn._lib.libgluon_dyn_ops",
        sorted(glob.glob("src/operator/control_flow/*.cc")) + ["src/ndarray/version.cc",
                                                                 "src/ndarray/call_description.cc",
                                                                 "src/ndarray/dlpack_exchange.cc",
                                                                 "src/engine/serial_regions.cc"],
        depends=sorted(glob.glob("src/operator/control_flow/*.h")), language="c++",
        extra_compile_args=["-std=c++17", "-g0"],
        # serial_regions.cc sets the OpenMP threads of MXNet's engine threads: the
        # GNU OpenMP runtime libmxnet.so links.
        libraries=["gomp"],
        # The library binds to its own copy of lib_api.cc's classes: libmxnet.so
        # exports the same names built with the old C++ ABI, and once a library
        # loaded with RTLD_GLOBAL (Horovod's) puts libmxnet.so in the global scope,
        # lazy binding would otherwise pick those ("free(): invalid pointer").
        extra_link_args=["-Wl,-Bsymbolic"])],
    cmdclass={"build_ext": OperatorLibraryBuild, "bdist_wheel": PythonIndependentWheel},
    options={"build": {"build_base": BUILD_BASE}},
)
