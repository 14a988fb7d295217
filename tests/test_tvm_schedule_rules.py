"""Our dlight rules: which kernels they take, the vector width they assume, and
results of the scheduled kernels against numpy."""
import numpy as np
import pytest
import tvm
from tvm import relax
from tvm.relax import op as R

from tvm_bridge import compiler, inlining, schedule_rules
from tvm_bridge.schedule_rules import (InlinedElementwise, SerialWhenSmall, SpatialLanesReduction,
                                       TiledTranspose)
from tvm.s_tir import dlight


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


def _largest_stored_value(schedule):
    """Nodes of the largest value a block of `schedule` stores, and how many blocks."""
    root = schedule.get_sblock("root")
    values = [inlining._stored_value(schedule.get(block))
              for block in schedule.get_child_blocks(root)]
    return max(inlining._nodes(value) for value in values if value is not None), len(values)


def test_chained_fast_tanh_is_inlined_without_copying_its_input_exponentially():
    # Fast tanh reads its input 19 times: four chained, fully inlined, would be
    # about 19**4 copies of the first (minutes and gigabytes in compute_inline).
    def chain(x):
        for _ in range(4):
            x = R.tanh(R.multiply(x, relax.const(1.5, "float32")))
        return x

    kernel = _kernel(chain, (2, 8))
    schedule = InlinedElementwise().apply(kernel, compiler.host_target(), False)
    largest, blocks = _largest_stored_value(schedule)
    assert blocks > 1 and largest <= 4 * inlining.DUPLICATED_NODES
    x = np.random.uniform(-2, 2, (2, 8)).astype("float32")
    expected = x
    for _ in range(4):
        expected = np.tanh(expected * 1.5)
    np.testing.assert_allclose(_run(schedule, x, out_shape=(2, 8)), expected, rtol=1e-5,
                               atol=1e-5)


def test_an_lstm_cells_elementwise_work_is_still_one_block():
    def cell_output(gates, c):
        i, f, g, o = (R.strided_slice(gates, axes=[1], begin=[k * 8], end=[k * 8 + 8])
                      for k in range(4))
        c = R.add(R.multiply(R.sigmoid(f), c), R.multiply(R.sigmoid(i), R.tanh(g)))
        return R.multiply(R.sigmoid(o), R.tanh(c))

    schedule = InlinedElementwise().apply(_kernel(cell_output, (1, 32), (1, 8)),
                                          compiler.host_target(), False)
    assert _largest_stored_value(schedule)[1] == 1


def _parallel_loops(schedule):
    return [loop for block in schedule.get_child_blocks(schedule.get_sblock("root"))
            for loop in schedule.get_loops(block)
            if schedule.get(loop).kind == tvm.tirx.ForKind.PARALLEL]


@pytest.mark.parametrize("rows, parallel", [(20, False), (512, True)])
def test_a_softmax_runs_its_rows_in_parallel_only_when_big(rows, parallel):
    # dlight's Reduction forks TVM's pool for any softmax: for 20 x 2 values the
    # fork costs more than the work, and waits for a core MXNet's threads hold.
    target = compiler.host_target()
    kernel = _kernel(R.nn.log_softmax, (rows, 256 if parallel else 2))
    schedule = SerialWhenSmall(dlight.cpu.Reduction()).apply(kernel, target, False)
    assert bool(_parallel_loops(schedule)) == parallel
    assert _parallel_loops(dlight.cpu.Reduction().apply(kernel, target, False))
    x = np.random.uniform(-3, 3, (rows, 256 if parallel else 2)).astype("float32")
    shifted = x - x.max(axis=1, keepdims=True)
    np.testing.assert_allclose(
        _run(schedule, x, out_shape=x.shape),
        shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True)), rtol=1e-5, atol=1e-5)
