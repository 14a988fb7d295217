"""Compiling a Relax IRModule for the local CPU, with a disk cache of the results.

Pipeline: common subexpressions merged, exp/tanh/sigmoid as vectorisable
polynomials (fast_math.py), 2-d convolutions as products over im2col columns
(conv_as_matmul.py), independent matmuls sharing a weight
batched (batch_matmuls.py), the matmuls a `gemms` policy picks computed by the
BLAS of the mxnet wheel (external_gemms.py; gemm_choice.py picks by measurement),
the other weights read in packed panels (packed_weights.py)
and, for a module that says which inputs are parameters, the work that depends
on parameters only lifted into a function of its own, run when they change
(Relax's LiftTransformParams: PREPARE_FUNCTION), the branches of a relax.If as
functions of their own (outline_branches.py), legalisation and fusion (TVM's
CPU passes), then tuned schedules from this module's meta-schedule database if
there is one, then dlight default schedules for the rest, then the VM lowering
passes.
Results are exported shared libraries keyed by module, target, tuning records,
the products routed to BLAS, TVM version and pipeline version, so another process
loads instead of compiling.
"""
import collections
import os
import time

import tvm
from tvm import relax, tirx
from tvm.relax.backend import cpu_generic
from tvm.s_tir import dlight, meta_schedule

from . import blas, cache, external_gemms
from .batch_matmuls import batch_shared_matmuls
from .conv_as_matmul import convolutions_as_matmuls
from .conv_schedule import ConvolutionTiles
from .fast_math import fast_math
from .outline_branches import outline_branches
from .packed_weights import pack_parameter_matmuls, panel_width
from .pool_schedule import WindowPooling
from .runtime import CompiledFunction, InputSpec, Signature, load_library, write_manifest
from .schedule_rules import (InlinedElementwise, PackedPanelGemm, SerialWhenSmall,
                             SpatialLanesReduction, TiledTranspose, lanes)
from .target import host_target, target_json

# Bump when the passes below change, so libraries built by older code are not reused.
PIPELINE_VERSION = 10


def every_gemm(gemm, target, dim_values, cache_dir):  # pylint: disable=unused-argument
    """The `gemms` policy computing every candidate product with BLAS."""
    return True


def signature_of(mod, external=()):
    """The Signature of mod["main"]: its parameters' names, shapes and dtypes; `external`
    lists the functions its library calls from other libraries."""
    if "main" not in [gv.name_hint for gv in mod.get_global_vars()]:
        raise ValueError("the module has no function 'main' to compile")
    function = mod["main"]
    if not isinstance(function, relax.Function):
        raise TypeError(f"'main' must be a Relax function, got {type(function).__name__}")
    inputs = []
    for param in function.params:
        param_type = param.ty
        if not isinstance(param_type, relax.TensorType) or param_type.shape is None:
            raise ValueError(f"input '{param.name}' must be a tensor of known rank, "
                             f"got {param_type}")
        inputs.append(InputSpec(param.name, [_dim(d) for d in param_type.shape.values],
                                param_type.dtype))
    num_data = (function.attrs or {}).get("num_input")
    num_data = None if num_data is None else int(num_data)
    returned = function.ret_ty
    if isinstance(returned, relax.TensorType):
        return Signature(inputs, 1, returns_tuple=False, num_data=num_data, external=external)
    return Signature(inputs, len(returned.fields), returns_tuple=True, num_data=num_data,
                     external=external)


def _dim(value):
    if isinstance(value, tirx.IntImm):
        return int(value)
    if isinstance(value, tirx.Var):
        return value.name
    return str(value)  # an expression of symbolic dims: checked by the VM only


def batched(mod):
    """`mod` with common subexpressions merged, fast math, convolutions as products
    over columns, and shared-weight matmuls batched: the products whose kernels are
    chosen."""
    # Weights are graph inputs: each per-step transpose of a weight is the same
    # value, computed once after CSE (which batching needs: one weight, one var).
    mod = convolutions_as_matmuls(fast_math(relax.transform.EliminateCommonSubexpr()(mod)))
    return batch_shared_matmuls(mod)


def fuse(mod, target, is_batched=False):
    """Legalised and fused module: the form meta-schedule extracts tasks from and
    tuning records are matched against. `is_batched`: `mod` went through batched()
    (and external_gemms.route) already."""
    passes = cpu_generic.library_dispatch_passes(target) + cpu_generic.legalize_passes(target)
    with target:
        mod = pack_parameter_matmuls(mod if is_batched else batched(mod),
                                     panel_width(lanes(target)))
        # A no-op for modules without "num_input" (nothing is known to be a parameter).
        mod = outline_branches(relax.transform.LiftTransformParams()(mod))
        return tvm.transform.Sequential(passes)(mod)


def default_rules():
    """The dlight rules scheduling what tuning did not, first match wins."""
    return [ConvolutionTiles(), PackedPanelGemm(), SpatialLanesReduction(), TiledTranspose(),
            WindowPooling(), SerialWhenSmall(dlight.cpu.Reduction()), InlinedElementwise()]


def lower(fused, target, database=None):
    """Schedule (database first, dlight for the rest) and lower a fused module."""
    with target:
        if database is not None:
            with database:
                fused = relax.transform.MetaScheduleApplyDatabase()(fused)
        fused = dlight.ApplyDefaultSchedule(*default_rules())(fused)
        passes = cpu_generic.pipeline.dataflow_lower_passes(target)
        return tvm.transform.Sequential(passes + cpu_generic.finalize_passes(target))(fused)


def tuning_database(directory):
    """The meta-schedule database in `directory`, or None if it was never tuned."""
    if not os.path.exists(cache.tuning_records_path(directory)):
        return None
    return meta_schedule.database.JSONDatabase(work_dir=directory, allow_missing=False)


def compile_module(mod, target=None, *, cache_dir=None, use_cache=True, use_tuning=True,
                   gemms=None, dim_values=None):
    """Compile mod["main"] for `target` (default: host_target()) into a CompiledFunction.

    With use_cache, a library built before for the same module, target, tuning
    records and BLAS products is loaded from `cache_dir` (default: see
    cache.cache_root) instead.
    With use_tuning, records from tuning.tune_module for this module are applied.
    `gemms`, if given, says which candidate products (external_gemms.Gemm) BLAS
    computes: `gemms(gemm, target, dim_values, cache_dir)` -> bool (every_gemm, or
    gemm_choice.measured_gemms); `dim_values` ({name: size}) are the sizes the example
    inputs gave the symbolic dims. Without it TVM's kernels compute them all.
    The result's `info`: from_cache, compile_seconds (0 when loaded), tuned,
    library (path, or None without the cache), blas_gemms (how many products of
    each shape BLAS computes: {Gemm.label(): count}).
    """
    target = target or host_target()
    root = cache.cache_root(cache_dir)
    module_key = cache.module_digest(mod)
    tuning_dir = cache.tuning_dir(root, module_key, target_json(target))
    database = tuning_database(tuning_dir) if use_tuning else None
    tuning_state = ("untuned" if database is None
                    else cache.file_digest(cache.tuning_records_path(tuning_dir)))
    routed, on_blas = None, []
    if gemms is not None:
        routed, on_blas = external_gemms.route(
            batched(mod), lambda gemm: gemms(gemm, target, dim_values or {}, cache_dir))
    labels = [gemm.label() for gemm in on_blas]
    key = cache.digest(module_key, target_json(target), tuning_state, tvm.__version__,
                       PIPELINE_VERSION, labels)
    library = os.path.join(root, "compiled", key[:32] + ".so")
    manifest = library[:-3] + ".json"
    info = {"tuned": database is not None, "library": library if use_cache else None,
            "blas_gemms": dict(collections.Counter(labels))}
    if use_cache and os.path.exists(library) and os.path.exists(manifest):
        return load_library(library, manifest, {**info, "from_cache": True, "compile_seconds": 0.0})

    signature = signature_of(mod, external=[blas.external_entry()] if on_blas else [])
    if on_blas:
        blas.load()  # before TVM compiles code in memory that calls it
    start = time.perf_counter()
    fused = fuse(mod, target) if routed is None else fuse(routed, target, is_batched=True)
    executable = tvm.compile(lower(fused, target, database), target=target, relax_pipeline=None)
    info.update(from_cache=False, compile_seconds=time.perf_counter() - start)
    if use_cache:
        os.makedirs(os.path.dirname(library), exist_ok=True)
        export_atomically(executable, library, blas.link_options(signature.external))
        write_manifest(manifest, signature)
    return CompiledFunction(executable, signature, info=info)


def export_atomically(executable, library, link_options=()):
    """Export under a temporary name and rename, so a concurrent reader never
    loads a half-written library."""
    temporary = f"{library[:-3]}.{os.getpid()}.tmp.so"
    executable.export_library(temporary, options=list(link_options))
    os.replace(temporary, library)
