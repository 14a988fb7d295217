"""Our dlight rules: which kernels they take, the vector width they assume, and
results of the scheduled kernels against numpy."""
import numpy as np
import pytest
import tvm
from tvm import relax
from tvm.relax import op as R

from tvm_bridge import compiler, schedule_rules
from tvm_bridge.schedule_rules import SpatialLanesReduction, TiledTranspose


def _kernels(build, *shapes):
    """The PrimFuncs TVM's fusion makes of `build(*params)`."""
    params = [relax.Var("p%d" % k, relax.TensorType(shape, "float32"))
              for k, shape in enumerate(shapes)]
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(build(*params))
        bb.emit_func_output(out)
    fused = compiler.fuse(bb.get(), compiler.host_target())
    return [f for gv, f in fused.functions.items() if gv.name_hint != "main"]


def _kernel(build, *shapes):
    (kernel,) = _kernels(build, *shapes)
    return kernel


def _run(schedule, *arrays, out_shape):
    function = schedule.mod["main"].with_attr("global_symbol", "kernel")
    library = tvm.compile(tvm.IRModule({"kernel": function}), target=compiler.host_target())
    args = [tvm.runtime.tensor(a) for a in arrays] + [tvm.runtime.empty(out_shape, "float32")]
    library["kernel"](*args)
    return args[-1].numpy()


@pytest.mark.parametrize("mcpu, bits", [("znver3", 256), ("skylake-avx512", 512),
                                        ("haswell", 256)])
def test_the_vector_width_comes_from_the_cpu_features(mcpu, bits):
    # LLVM's own answer for znver3 (AVX2 only) is 512, and 16-lane tiles spilled.
    assert schedule_rules._vector_bits(tvm.target.Target({"kind": "llvm", "mcpu": mcpu})) == bits


@pytest.mark.parametrize("rows", [1, 3, 32])
def test_a_matmul_with_an_epilogue_takes_register_tiles_and_matches_numpy(rows):
    kernel = _kernel(lambda x, w, b: R.add(R.matmul(x, w), b), (rows, 48), (48, 64), (64,))
    schedule = SpatialLanesReduction().apply(kernel, compiler.host_target(), False)
    assert schedule is not None
    x, w, b = (np.random.uniform(-1, 1, s).astype("float32") for s in ((rows, 48), (48, 64), (64,)))
    np.testing.assert_allclose(_run(schedule, x, w, b, out_shape=(rows, 64)), x @ w + b,
                               rtol=1e-5, atol=1e-5)


def test_a_transpose_is_tiled_and_an_elementwise_kernel_is_not_taken():
    target = compiler.host_target()
    transpose = TiledTranspose().apply(_kernel(R.permute_dims, (64, 48)), target, False)
    assert transpose is not None and len(transpose.get_loops(transpose.get_sblock(
        "T_transpose"))) == 3  # a fused loop over the tiles, then the two within a tile
    w = np.random.uniform(-1, 1, (64, 48)).astype("float32")
    np.testing.assert_array_equal(_run(transpose, w, out_shape=(48, 64)), w.T)
    assert TiledTranspose().apply(_kernel(R.tanh, (64, 48)), target, False) is None
    # A 0-d result (`sum(x) > 0`, a while loop's condition) has no axes to tile.
    for kernel in _kernels(lambda x: R.greater(R.sum(x), relax.const(0.0, "float32")), (1,)):
        assert TiledTranspose().apply(kernel, target, False) is None
