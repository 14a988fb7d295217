"""Convolutions as products over im2col columns (conv_as_matmul.py, conv_schedule.py)
and window pooling (pool_schedule.py), compiled by tvm_bridge's own pipeline:
the rewrite and the schedules really apply (the modules are inspected), results
match MXNet to 1e-5, and LeNet's plan forced onto TVM runs its convolutions
through them, in Python and exported, from the C runtime."""
import warnings

import mxnet as mx
import numpy as np
import pytest
from tvm import relax, s_tir, tirx
from tvm.relax import op as R

from deploy_models import assert_same, export_plan, python_outputs
from native_runtime import run_model
from test_c_runtime import report_counts, runner  # noqa: F401 - runner is a fixture
from test_tvm_block import on_tvm
from test_tvm_models import initialized, lenet
from tvm_bridge import build_graph_module, compile_block, compiler
from tvm_bridge.conv_as_matmul import BLOCK, convolutions_as_matmuls
from tvm_bridge.conv_schedule import ConvolutionTiles, choose_tile
from tvm_bridge.pool_schedule import WindowPooling
from tvm_bridge.schedule_rules import PACKED_SPARE_REGISTERS
from tvm_helpers import concrete, make_inputs, run_mxnet

S = mx.sym
data, weight = S.var("data"), S.var("weight")

CONVOLUTIONS = [
    ("bias", S.Convolution(data, weight, S.var("bias"), kernel=(3, 3), num_filter=8),
     {"data": (2, 3, 9, 8), "weight": (8, 3, 3, 3)}),
    ("stride_pad_no_bias", S.Convolution(data, weight, kernel=(3, 3), stride=(2, 2), pad=(1, 1),
                                         num_filter=6, no_bias=True),
     {"data": (2, 4, 9, 10), "weight": (6, 4, 3, 3)}),
    ("dilation_uneven", S.Convolution(data, weight, kernel=(3, 2), stride=(1, 2), pad=(2, 1),
                                      dilate=(2, 1), num_filter=5, no_bias=True),
     {"data": (1, 2, 11, 9), "weight": (5, 2, 3, 2)}),
    ("groups", S.Convolution(data, weight, S.var("bias"), kernel=(3, 3), pad=(1, 1), num_group=2,
                             num_filter=12),
     {"data": (2, 4, 8, 8), "weight": (12, 2, 3, 3)}),
    ("depthwise", S.Convolution(data, weight, kernel=(3, 3), pad=(1, 1), num_group=6,
                                num_filter=6, no_bias=True),
     {"data": (2, 6, 7, 7), "weight": (6, 1, 3, 3)}),
    ("pointwise_relu", S.relu(S.Convolution(data, weight, S.var("bias"), kernel=(1, 1),
                                            num_filter=16)),
     {"data": (3, 8, 6, 8), "weight": (16, 8, 1, 1)}),
    ("lenet_sized_relu", S.relu(S.Convolution(data, weight, S.var("bias"), kernel=(5, 5),
                                              num_filter=50)),
     {"data": (4, 20, 12, 12), "weight": (50, 20, 5, 5)}),
    ("product_also_an_output", S.Group([
        S.Convolution(data, weight, kernel=(3, 3), num_filter=4, no_bias=True, name="c"),
        S.sigmoid(S.Convolution(data, weight, kernel=(3, 3), num_filter=4, no_bias=True,
                                name="c"))]),
     {"data": (2, 2, 6, 6), "weight": (4, 2, 3, 3)}),
]
POOLINGS = [
    ("max", S.Pooling(data, kernel=(2, 2), stride=(2, 2)), {"data": (2, 3, 12, 12)}),
    ("max_padded", S.Pooling(data, kernel=(3, 3), stride=(2, 2), pad=(1, 1)),
     {"data": (2, 3, 9, 9)}),
    ("avg_padded", S.Pooling(data, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg",
                             count_include_pad=False), {"data": (2, 3, 7, 7)}),
    ("avg_wide_rows", S.Pooling(data, kernel=(2, 2), stride=(2, 2), pool_type="avg"),
     {"data": (1, 2, 4, 64)}),
]


def _kernels(mod):
    """The PrimFuncs of `mod` after tvm_bridge's legalisation and fusion."""
    fused = compiler.fuse(mod, compiler.host_target())
    return [f for f in fused.functions.values() if isinstance(f, tirx.PrimFunc)]


def _block_names(kernel):
    schedule = s_tir.Schedule(kernel)
    return [schedule.get(block).name_hint
            for block in schedule.get_child_blocks(schedule.get_sblock("root"))]


def _compile_and_compare(symbol, shapes, tmp_path, symbolic_dims=None, sizes=(None,)):
    mod, input_names, _ = build_graph_module(symbol, shapes, symbolic_dims=symbolic_dims)
    function = compiler.compile_module(mod, cache_dir=str(tmp_path))
    for size in sizes:
        run_shapes = {name: concrete(shape, (symbolic_dims or {}).get(name, {}), size)
                      for name, shape in shapes.items()}
        inputs = make_inputs(symbol, run_shapes, seed=size or 0)
        outputs, expected_outputs = (function(*[inputs[name] for name in input_names]),
                                     run_mxnet(symbol, inputs))
        assert len(outputs) == len(expected_outputs)
        for got, expected in zip(outputs, expected_outputs):
            np.testing.assert_allclose(got.asnumpy(), expected, rtol=1e-5, atol=1e-5)
    return mod


@pytest.mark.parametrize("name,symbol,shapes", CONVOLUTIONS, ids=[c[0] for c in CONVOLUTIONS])
def test_a_convolution_becomes_a_tiled_product_and_matches_mxnet(name, symbol, shapes,
                                                                  tmp_path):
    mod = _compile_and_compare(symbol, shapes, tmp_path)
    kernels = [k for k in _kernels(mod) if BLOCK in _block_names(k)]
    assert kernels and not any("conv2d_nchw" in _block_names(k) for k in _kernels(mod))
    for kernel in kernels:
        assert ConvolutionTiles().apply(kernel, compiler.host_target(), False) is not None


def test_a_symbolic_batch_is_one_compiled_product(tmp_path):
    name, symbol, shapes = CONVOLUTIONS[1]
    mod = _compile_and_compare(symbol, shapes, tmp_path, symbolic_dims={"data": {0: "batch"}},
                               sizes=(1, 3, 8))
    (kernel,) = [k for k in _kernels(mod) if BLOCK in _block_names(k)]
    assert ConvolutionTiles().apply(kernel, compiler.host_target(), False) is not None


@pytest.mark.parametrize("name,symbol,shapes", POOLINGS, ids=[p[0] for p in POOLINGS])
def test_window_pooling_is_scheduled_and_matches_mxnet(name, symbol, shapes, tmp_path):
    mod = _compile_and_compare(symbol, shapes, tmp_path)
    (kernel,) = _kernels(mod)
    assert WindowPooling().apply(kernel, compiler.host_target(), False) is not None


@pytest.mark.parametrize("filters,out_h,out_w,lanes", [
    (50, 8, 8, 16), (20, 24, 24, 16), (6, 7, 7, 16), (7, 5, 3, 8), (64, 1, 128, 16)])
def test_a_tile_divides_the_output_and_fits_the_registers(filters, out_h, out_w, lanes):
    accumulators = 32
    tile = choose_tile(filters, out_h, out_w, lanes, accumulators)
    assert filters % tile.rows == 0 and lanes % tile.width == 0
    assert out_h % tile.out_rows == 0 and out_w % tile.out_columns == 0
    assert tile.out_rows == 1 or tile.out_columns == out_w  # whole rows, or part of one
    assert (tile.out_rows * tile.out_columns) % tile.width == 0
    assert tile.rows * tile.vectors <= accumulators - PACKED_SPARE_REGISTERS


def _conv_module(data_type, weight_type):
    x, w = relax.Var("x", data_type), relax.Var("w", weight_type)
    builder = relax.BlockBuilder()
    with builder.function("main", [x, w]):
        builder.emit_func_output(builder.emit(R.nn.conv2d(x, w)))
    return builder.get()


@pytest.mark.parametrize("data_type,weight_type,reason", [
    (relax.TensorType((1, 2, 5, 5), "float64"), relax.TensorType((3, 2, 3, 3), "float64"),
     "only float32"),
    (relax.TensorType((1, 2, tirx.Var("h", "int64"), 5), "float32"),
     relax.TensorType((3, 2, 3, 3), "float32"), "only the batch may be symbolic")])
def test_a_convolution_that_is_not_rewritten_says_why(data_type, weight_type, reason):
    mod = _conv_module(data_type, weight_type)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rewritten = convolutions_as_matmuls(mod)
    assert "R.nn.conv2d(" in rewritten.script()
    assert any(reason in str(w.message) for w in caught), [str(w.message) for w in caught]


def test_lenet_forced_onto_tvm_runs_its_convolutions_as_products(tmp_path):
    net = initialized(lenet())
    batch = {0: {0: "batch"}}
    examples = {size: mx.nd.array(np.random.RandomState(size).uniform(-1, 1, (size, 1, 16, 16)))
                for size in (1, 64)}
    compiled = on_tvm(net, examples[1], symbolic_dims=batch, cache_dir=str(tmp_path))
    (step,) = [s for s in compiled.plan.steps if s.backend == "tvm"]
    assert "Convolution" in compiled.report()["segments"][0]["op_names"]
    calls = [line for line in step.function.executable.as_text().splitlines()
             if line.strip().startswith("call")]
    assert sum("fused_conv_matmul" in call for call in calls) == 2
    assert not any("conv2d" in call for call in calls)
    for images in examples.values():
        np.testing.assert_allclose(compiled(images).asnumpy(), net(images).asnumpy(),
                                   rtol=1e-5, atol=1e-5)


def test_measuring_against_onednn_does_not_make_tvm_prepare_its_weights_again(tmp_path):
    """oneDNN keeps a convolution weight in a blocked layout in the array's memory;
    TVM reading the same arrays re-lays them out, and its prepared parameters
    were made again at every timed call. MXNet is timed on copies."""
    net = initialized(lenet())
    images = mx.nd.array(np.random.RandomState(0).uniform(-1, 1, (2, 1, 16, 16)))
    net.hybridize(static_alloc=True, static_shape=True)
    net(images)  # oneDNN has laid its weights out
    compiled = compile_block(net, images, cache_dir=str(tmp_path))
    (step,) = [s for s in compiled.plan.steps if s.function is not None]
    assert step.choice.history and step.function.preparations == 1
    compiled(images)
    assert step.function.preparations == 1


def test_lenet_plan_runs_its_convolutions_from_the_c_runtime(runner, tmp_path):
    net = initialized(lenet())
    rng = np.random.RandomState(4)
    example = [rng.uniform(-1, 1, (2, 1, 16, 16)).astype("f4")]
    compiled, prefix = export_plan(net, example, tmp_path, "lenet", str(tmp_path / "cache"),
                                   symbolic_dims={0: {0: "batch"}})
    assert [s["backend"] for s in compiled.report()["segments"]] == ["tvm"]
    calls = [[rng.uniform(-1, 1, (batch, 1, 16, 16)).astype("f4")] for batch in (2, 5, 1)]
    got, stdout = run_model(runner, prefix, calls, str(tmp_path))
    assert_same(got, python_outputs(net, calls), "LeNet plan from C")
    assert report_counts(stdout) == (3, 0)
