"""Which matrix products run on BLAS: measured per product shape (external_gemms.py).

For each candidate shape the product is compiled alone both ways (TVM's packed
kernel, and BLAS: blas.py) and timed on this machine, interleaved; a
gluon_dyn.measure.MeasuredChoice with TVM as the incumbent decides, so BLAS must be
faster by the margin in two measurements in a row. A shape whose row count depends
on a symbolic dim is measured at the size the example inputs gave it; without one,
it stays on TVM, as do small products (MEASURED_MIN_WORK). Decisions are kept for
the process (one per shape and target).
"""
import numpy as np
import mxnet as mx
from gluon_dyn.measure import MeasuredChoice, decide_by_timing, interleaved_samples
from tvm import relax
from tvm.relax import op as R

from .compiler import compile_module, every_gemm
from .target import target_json

TVM, BLAS = "tvm", "blas"
REPEATS = 15  # timed calls per kernel and measurement
# Smaller products (multiply-adds) stay on TVM unmeasured: either kernel takes a few
# microseconds (a hidden-64 LSTM's 50x64x256 input projection: 14-20 us on TVM, 25 on
# OpenBLAS, benchmarks/gemm_kernels.py), not worth two compiles and a measurement.
MEASURED_MIN_WORK = 1 << 20


def gemm_variants(gemm, rows, target, cache_dir, operands=None):
    """Zero-argument callables computing the product at `rows` rows with each kernel
    ({TVM: fn, BLAS: fn}, each returning the product), on `operands` (NDArrays shaped
    as the product's A and B are stored; default: random) of which the second is a
    parameter, as a weight is: prepared once."""
    module = _single_gemm(gemm, rows)
    if operands is None:
        rng = np.random.RandomState(0)
        operands = [mx.nd.array(rng.standard_normal([int(d) for d in param.ty.shape.values]),
                                dtype="float32") for param in module["main"].params]
    functions = {TVM: compile_module(module, target, cache_dir=cache_dir),
                 BLAS: compile_module(module, target, cache_dir=cache_dir, gemms=every_gemm)}
    return {name: (lambda function=function: function.call_unchecked(*operands))
            for name, function in functions.items()}


def _single_gemm(gemm, rows):
    """main(a, b) computing the product as written in a graph (transposes as permute_dims);
    b is a parameter, as a weight is."""
    a_shape = (gemm.depth, rows) if gemm.transpose_a else (rows, gemm.depth)
    b_shape = (gemm.columns, gemm.depth) if gemm.transpose_b else (gemm.depth, gemm.columns)
    a = relax.Var("a", relax.TensorType(a_shape, "float32"))
    b = relax.Var("b", relax.TensorType(b_shape, "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [a, b], attrs={"num_input": 1}):
        with bb.dataflow():
            lhs = bb.emit(R.permute_dims(a)) if gemm.transpose_a else a
            rhs = bb.emit(R.permute_dims(b)) if gemm.transpose_b else b
            product = bb.emit_output(R.matmul(lhs, rhs))
        bb.emit_func_output(product)
    return bb.get()


class GemmChooser:
    """`chooser(gemm, target, dim_values, cache_dir)`: whether BLAS computes `gemm`
    (compile_module's `gemms`). `variants(gemm, rows, target, cache_dir)` gives the
    kernels to time and `sample` times them (interleaved_samples' signature); both
    are injectable for tests."""

    def __init__(self, variants=gemm_variants, sample=interleaved_samples):
        self._variants, self._sample = variants, sample
        self.choices = {}  # (shape label, target) -> MeasuredChoice

    def __call__(self, gemm, target, dim_values, cache_dir):
        rows = gemm.rows_for(dim_values)
        if rows is None or rows * gemm.depth * gemm.columns < MEASURED_MIN_WORK:
            return False
        key = (gemm._replace(rows=rows).label(), target_json(target))
        choice = self.choices.get(key)
        if choice is None:
            choice = self.choices[key] = MeasuredChoice((TVM, BLAS), incumbent=TVM)
            decide_by_timing(choice, self._variants(gemm, rows, target, cache_dir),
                             "kernel of %s" % key[0], REPEATS, self._sample)
        return choice.chosen == BLAS

    def report(self):
        """Per measured shape: the kernel chosen and the measurements (MeasuredChoice.report)."""
        return {label: choice.report() for (label, _), choice in self.choices.items()}


# The process's decisions, shared by every plan compiled in it.
measured_gemms = GemmChooser()
