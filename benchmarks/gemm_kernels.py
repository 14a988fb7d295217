"""GFLOP/s of the matrix products of the benchmarked LSTMs, per kernel.

Each product C = A W^T (a FullyConnected: W stored as out x in) of the LSTM in
tvm_bridge_speed.py: hidden 512 (the batched input projection of 100 steps at batch
32, a step's recurrent product at batch 32 and at batch 1) and hidden 64 (50 steps
at batch 1, one step). Kernels: TVM's generated one (packed panels,
schedule_rules.PackedPanelGemm), the mxnet wheel's OpenBLAS called from a TVM kernel
(external_gemms.py), both as tvm_bridge compiles a product alone
(gemm_choice.gemm_variants: what the choice by measurement times), and MXNet's
FullyConnected (oneDNN) for reference. Outputs checked against numpy, then
interleaved calls, medians (harness.compare); TVM_NUM_THREADS threads for TVM and
OpenBLAS (OMP_NUM_THREADS for MXNet's oneDNN). A timed call runs its kernel --block
times in a row: each library's idle threads spin for a while after a call, and
on 2 cores the first call after another library's runs beside that spinning (the
table of a single call per variant measures that interference more than the kernels).
"""
import argparse
import tempfile

import mxnet as mx
import numpy as np

import harness
from tvm_bridge.external_gemms import Gemm
from tvm_bridge.gemm_choice import BLAS, TVM, gemm_variants
from tvm_bridge.runtime import configure_threads
from tvm_bridge.target import host_target

# (what it is, rows, depth, columns)
PRODUCTS = [("H512 input projection, 100 steps x batch 32", 3200, 512, 2048),
            ("H512 recurrent step, batch 32", 32, 512, 2048),
            ("H512 recurrent step, batch 1", 1, 512, 2048),
            ("H64 input projection, 50 steps x batch 1", 50, 64, 256),
            ("H64 recurrent step, batch 1", 1, 64, 256)]
NAMES = {TVM: "TVM (packed panels)", BLAS: "OpenBLAS (mxnet wheel)"}
# Sums of `depth` products of normal values: float32 rounding reaches 1e-4 near 0.
RTOL, ATOL = 1e-4, 1e-3


def repeated(run, times):
    def run_block():
        for _ in range(times - 1):
            run()
        return run()
    return run_block


def variants(a, w, cache_dir, block):
    """The kernels computing a w^T, each checked against numpy here (numpy is not timed:
    its own OpenBLAS threads would spin beside the others')."""
    (rows, depth), columns = a.shape, w.shape[0]
    kernels = gemm_variants(Gemm(rows, depth, columns, False, True), rows, host_target(),
                            cache_dir, operands=[a, w])
    found = [harness.Variant(NAMES[name], run, rtol=RTOL, atol=ATOL)
             for name, run in kernels.items()]
    found.append(harness.Variant("MXNet FullyConnected (oneDNN)", lambda: mx.nd.FullyConnected(
        a, w, no_bias=True, num_hidden=columns), rtol=RTOL, atol=ATOL))
    expected = a.asnumpy() @ w.asnumpy().T
    for variant in found:
        np.testing.assert_allclose(variant.run().asnumpy(), expected, rtol=RTOL, atol=ATOL,
                                   err_msg=variant.name)
        variant.run = repeated(variant.run, block)
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--block", type=int, default=8, help="kernel calls per timed call")
    args = parser.parse_args()
    print("TVM_NUM_THREADS=%d" % configure_threads())
    with tempfile.TemporaryDirectory(prefix="gemm_kernels_") as cache_dir:
        rows_out = []
        for what, rows, depth, columns in PRODUCTS:
            a = harness.normal_array((rows, depth), 0)
            found = variants(a, harness.normal_array((columns, depth), 1), cache_dir, args.block)
            # The operands stay the same (a weight is prepared once per change).
            timings = harness.compare(found, lambda call: (), args.repeats, warmup=3)
            flops = 2 * rows * depth * columns
            ms = {v.name: timings[v.name].median_ms / args.block for v in found}
            rows_out.append([what, "%dx%dx%d" % (rows, depth, columns)] + [
                "%.0f (%.3f ms)" % (flops / ms[v.name] / 1e6, ms[v.name]) for v in found])
        harness.print_table("GFLOP/s (median ms) per matrix product, C = A W^T",
                            ["product", "MxKxN"] + [v.name for v in found], rows_out)


if __name__ == "__main__":
    main()
