"""Matrix products on the mxnet wheel's OpenBLAS (tvm_bridge/external_gemms.py, blas.py),
chosen per product shape by measurement (gemm_choice.py).

Routed products against numpy (symbolic rows, transposed operands, bias epilogues, the
batched input projection), with a VM instrument proving the BLAS kernel ran; the
choice by measurement with injected timings, per product and per segment;
SegmentedGraph's `gemms` option; a plan calling BLAS exported, loaded back in Python,
and its bad signatures refused.
"""
import json
import os
import shutil

import mxnet as mx
import numpy as np
import pytest
import tvm
from tvm import relax, tirx
from tvm.relax import op as R

from gluon_dyn import measure
from tvm_bridge import blas, compile_block, external_gemms, gemm_choice, runtime, segmented
from tvm_bridge.compiler import compile_module, every_gemm
from tvm_bridge.deploy_loader import load_plan
from tvm_bridge.external_gemms import Gemm
from tvm_helpers import COMPILE_CACHE, RTOL, uniform

CACHE = COMPILE_CACHE.name


def _module(build, params, num_input=None):
    """main(*params) returning build(bb, *params), a dataflow of its own."""
    bb = relax.BlockBuilder()
    with bb.function("main", params, attrs=None if num_input is None else
                     {"num_input": num_input}):
        with bb.dataflow():
            out = bb.emit_output(build(bb, *params))
        bb.emit_func_output(out)
    return bb.get()


def _dense(rows=None):
    """relu(x W^T + b), x with `rows` rows (default: symbolic "n"), W 24x16."""
    n = tirx.Var("n", "int64") if rows is None else rows
    params = [relax.Var("x", relax.TensorType((n, 16), "float32")),
              relax.Var("w", relax.TensorType((24, 16), "float32")),
              relax.Var("b", relax.TensorType((24,), "float32"))]
    return _module(lambda bb, x, w, b: R.nn.relu(R.add(R.matmul(x, R.permute_dims(w)), b)),
                   params, num_input=1)


def _blas_calls(function, arrays):
    """How many times the BLAS kernel ran while `function` prepared its parameters and
    ran main once, counted by a VM instrument (and the outputs of main)."""
    vm = relax.VirtualMachine(function.executable, tvm.cpu())
    calls = []

    def instrument(_func, symbol, before_run, _ret, *_args):
        if before_run:
            calls.append(str(symbol))
        return 0

    vm.set_instrument(instrument)
    tensors = [tvm.runtime.tensor(a) for a in arrays]
    num_data = function.signature.num_data
    if num_data is not None:  # main takes the parameters as the prepare function made them
        tensors = tensors[:num_data] + list(vm[runtime.PREPARE_FUNCTION](tensors[num_data:]))
    outputs = vm["main"](*tensors)
    return sum(name.startswith(external_gemms.KERNEL) for name in calls), outputs


def _assert_close(got, expected):
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=RTOL * np.abs(expected).max())


@pytest.mark.parametrize("rows", [1, 5, 33])
def test_a_dense_layer_with_symbolic_rows_runs_on_blas_and_matches_numpy(rows):
    function = compile_module(_dense(), cache_dir=CACHE, gemms=every_gemm)
    assert function.info["blas_gemms"] == {"(n)x16x24 B^T": 1}
    assert function.signature.external == [blas.external_entry()]
    x, w, b = uniform((rows, 16), seed=1), uniform((24, 16), seed=2), uniform((24,), seed=3)
    expected = np.maximum(x @ w.T + b, 0)
    _assert_close(function(mx.nd.array(x), mx.nd.array(w), mx.nd.array(b)).asnumpy(), expected)
    count, outputs = _blas_calls(function, [x, w, b])
    assert count == 1
    _assert_close(outputs.numpy(), expected)


@pytest.mark.parametrize("transpose_a, transpose_b", [(False, False), (False, True),
                                                      (True, False), (True, True)])
def test_transposed_operands_are_read_as_stored(transpose_a, transpose_b):
    gemm = Gemm(7, 12, 20, transpose_a, transpose_b)
    module = gemm_choice._single_gemm(gemm, 7)  # pylint: disable=protected-access
    function = compile_module(module, cache_dir=CACHE, gemms=every_gemm)
    assert function.info["blas_gemms"] == {gemm.label(): 1}
    a = uniform((12, 7) if transpose_a else (7, 12), seed=4)
    b = uniform((20, 12) if transpose_b else (12, 20), seed=5)
    expected = (a.T if transpose_a else a) @ (b.T if transpose_b else b)
    count, outputs = _blas_calls(function, [a, b])
    assert count == 1
    _assert_close(outputs.numpy(), expected)
    _assert_close(function(mx.nd.array(a), mx.nd.array(b)).asnumpy(), expected)


def test_the_batched_input_projection_and_the_recurrent_products_run_on_blas():
    """h = tanh(x_t W^T + b + h U^T) over 6 steps: batching makes one 12x5x8 product of
    the inputs; the 6 recurrent ones stay per step (the first, of the initial zeros, is
    computed when the parameters are prepared). Every one of them calls BLAS."""
    steps, batch, width, units = 6, 2, 5, 8
    seq = relax.Var("seq", relax.TensorType((steps, batch, width), "float32"))
    w = relax.Var("w", relax.TensorType((units, width), "float32"))
    u = relax.Var("u", relax.TensorType((units, units), "float32"))
    b = relax.Var("b", relax.TensorType((units,), "float32"))

    def build(bb, seq, w, u, b):
        h = bb.emit(R.zeros((batch, units), "float32"))
        for t in range(steps):
            x = bb.emit(R.reshape(bb.emit(R.strided_slice(seq, [0], [t], [t + 1])),
                                  (batch, width)))
            projected = bb.emit(R.add(R.matmul(x, R.permute_dims(w)), b))
            h = bb.emit(R.tanh(R.add(projected, R.matmul(h, R.permute_dims(u)))))
        return h

    function = compile_module(_module(build, [seq, w, u, b], num_input=1), cache_dir=CACHE,
                              gemms=every_gemm)
    assert function.info["blas_gemms"] == {"12x5x8 B^T": 1, "2x8x8 B^T": steps}
    arrays = [uniform((steps, batch, width), seed=6), uniform((units, width), seed=7),
              uniform((units, units), seed=8), uniform((units,), seed=9)]
    h = np.zeros((batch, units), "float32")
    for t in range(steps):
        h = np.tanh(arrays[0][t] @ arrays[1].T + arrays[3] + h @ arrays[2].T)
    count, outputs = _blas_calls(function, arrays)
    assert count == 1 + steps
    _assert_close(outputs.numpy(), h)


def test_without_a_policy_no_product_calls_blas():
    function = compile_module(_dense(), cache_dir=CACHE)
    assert function.info["blas_gemms"] == {} and function.signature.external == []
    assert _blas_calls(function, [uniform((3, 16)), uniform((24, 16)), uniform((24,))])[0] == 0


def _scripted(*rounds):
    """A `sample` giving the rounds of timings (tvm ms, blas ms) in order."""
    script = iter(rounds)

    def sample(variants, repeats):
        assert set(variants) == {gemm_choice.TVM, gemm_choice.BLAS} and repeats > 0
        tvm_ms, blas_ms = next(script)
        return {gemm_choice.TVM: [tvm_ms / 1000] * measure.MIN_SAMPLES,
                gemm_choice.BLAS: [blas_ms / 1000] * measure.MIN_SAMPLES}
    return sample


class _Kernels:
    """`variants` of a GemmChooser that records the row counts it was asked to time."""

    def __init__(self):
        self.rows = []

    def __call__(self, gemm, rows, target, cache_dir):
        self.rows.append(rows)
        return {gemm_choice.TVM: None, gemm_choice.BLAS: None}


BIG = Gemm(3200, 512, 2048, False, True)


@pytest.mark.parametrize("rounds, chosen", [
    ([(10.0, 5.0), (10.0, 5.0)], True),                 # faster twice: BLAS
    ([(10.0, 5.0), (10.0, 11.0)], False),               # faster once: TVM stays
    ([(10.0, 9.8), ], False),                           # within the margin: TVM stays
    ([(5.0, 10.0)], False),                             # slower: TVM stays
])
def test_the_choice_by_measurement_follows_the_policy(rounds, chosen):
    kernels = _Kernels()
    chooser = gemm_choice.GemmChooser(kernels, _scripted(*rounds))
    target = tvm.target.Target({"kind": "llvm"})
    assert chooser(BIG, target, {}, CACHE) is chosen
    assert kernels.rows == [3200]
    history = chooser.report()[BIG.label()]["history"]
    assert len(history) == len(rounds) and history[-1]["chosen"] == ("blas" if chosen else "tvm")
    # Decided once per shape and target: asking again measures nothing.
    assert chooser(BIG, target, {}, CACHE) is chosen and kernels.rows == [3200]


def test_small_and_unsized_products_stay_on_tvm_unmeasured_and_symbolic_ones_take_the_example():
    kernels = _Kernels()
    chooser = gemm_choice.GemmChooser(kernels, _scripted((10.0, 5.0), (10.0, 5.0)))
    target = tvm.target.Target({"kind": "llvm"})
    assert not chooser(Gemm(50, 64, 256, False, True), target, {}, CACHE)
    batch = tirx.Var("batch", "int64")
    symbolic = Gemm(batch * 100, 512, 2048, False, True)
    assert not chooser(symbolic, target, {}, CACHE)  # no size for "batch"
    assert kernels.rows == []
    assert chooser(symbolic, target, {"batch": 32}, CACHE)
    assert kernels.rows == [3200] and list(chooser.report()) == ["3200x512x2048 B^T"]


def test_compile_module_routes_what_the_chooser_picks():
    picked = []

    def chooser(gemm, target, dim_values, cache_dir):
        picked.append((gemm.label(), dim_values, cache_dir))
        return True

    function = compile_module(_dense(), cache_dir=CACHE, gemms=chooser, dim_values={"n": 4})
    assert picked == [("(n)x16x24 B^T", {"n": 4}, CACHE)]
    assert function.info["blas_gemms"] == {"(n)x16x24 B^T": 1}


def _dense_symbol():
    x, w, b = mx.sym.var("x"), mx.sym.var("w"), mx.sym.var("b")
    return mx.sym.Activation(mx.sym.FullyConnected(x, w, b, num_hidden=24), act_type="tanh")


def test_a_segmented_graph_takes_the_gemms_option():
    arrays = [mx.nd.array(uniform((6, 16), seed=10)), mx.nd.array(uniform((24, 16), seed=11)),
              mx.nd.array(uniform((24,), seed=12))]
    plan = segmented.SegmentedGraph(_dense_symbol(), ["x", "w", "b"], arrays, cache_dir=CACHE,
                          choose_by_measurement=False, gemms="blas")
    segment = plan.report()["segments"][0]
    assert segment["backend"] == "tvm" and segment["blas_gemms"] == {"6x16x24 B^T": 1}
    expected = np.tanh(arrays[0].asnumpy() @ arrays[1].asnumpy().T + arrays[2].asnumpy())
    _assert_close(plan(*arrays)[0].asnumpy(), expected)
    untouched = segmented.SegmentedGraph(_dense_symbol(), ["x", "w", "b"], arrays, cache_dir=CACHE,
                               choose_by_measurement=False)
    assert untouched.report()["segments"][0]["blas_gemms"] == {}
    with pytest.raises(ValueError, match="gemms='cublas': expected one of measure, blas, tvm"):
        segmented.SegmentedGraph(_dense_symbol(), ["x", "w", "b"], arrays, cache_dir=CACHE,
                       choose_by_measurement=False, gemms="cublas")


def _segment_samples(*rounds):
    """A scripted interleaved_samples for SegmentedGraph: each round {name: ms}."""
    script = iter(rounds)

    def sample(variants, repeats):
        medians = next(script)
        assert set(variants) == set(medians) and repeats > 0
        return {name: [ms / 1000] * measure.MIN_SAMPLES for name, ms in medians.items()}
    return sample


@pytest.mark.parametrize("blas_ms, kept", [(5.0, False), (1.0, True)])
def test_products_measured_faster_alone_stay_on_blas_only_if_the_segment_gains(
        monkeypatch, blas_ms, kept):
    """The product (64x128x128) measures faster on BLAS alone (injected timings); the
    segment is then timed with it and with TVM's kernels only (scripted): with BLAS 5 ms
    against 2 ms it gets TVM's kernels, with 1 ms (twice) it keeps BLAS."""
    chooser = gemm_choice.GemmChooser(_Kernels(), _scripted((10.0, 5.0), (10.0, 5.0)))
    monkeypatch.setattr(segmented, "measured_gemms", chooser)
    monkeypatch.setitem(segmented.GEMM_POLICIES, "measure", chooser)
    on_blas, kernels = segmented.BLAS_PRODUCTS, segmented.TVM_KERNELS
    rounds = [{on_blas: blas_ms, kernels: 2.0}] * (2 if kept else 1)
    rounds += [{"tvm": 1.0, "mxnet": 5.0}] * 2 + [{"plan": 1.0, "whole graph": 5.0}] * 2
    monkeypatch.setattr(segmented, "interleaved_samples", _segment_samples(*rounds))
    arrays = [mx.nd.array(uniform((64, 128), seed=14)), mx.nd.array(uniform((128, 128), seed=15)),
              mx.nd.array(uniform((128,), seed=16))]
    x, w, b = mx.sym.var("x"), mx.sym.var("w"), mx.sym.var("b")
    symbol = mx.sym.tanh(mx.sym.FullyConnected(x, w, b, num_hidden=128))
    plan = segmented.SegmentedGraph(symbol, ["x", "w", "b"], arrays, cache_dir=CACHE)
    segment = plan.report()["segments"][0]
    assert segment["backend"] == "tvm" and not plan.uses_whole_graph
    assert segment["blas_gemms"] == ({"64x128x128 B^T": 1} if kept else {})
    assert segment["kernel_choice"]["chosen"] == (on_blas if kept else kernels)
    assert len(segment["kernel_choice"]["history"]) == len(rounds) - 4
    expected = np.tanh(arrays[0].asnumpy() @ arrays[1].asnumpy().T + arrays[2].asnumpy())
    _assert_close(plan(*arrays)[0].asnumpy(), expected)


class _Dense(mx.gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.hidden = mx.gluon.nn.Dense(24, in_units=16, activation="tanh")
            self.out = mx.gluon.nn.Dense(3, in_units=24)

    def hybrid_forward(self, F, x):
        return self.out(self.hidden(x))


@pytest.fixture(scope="module")
def blas_plan(tmp_path_factory):
    """A two-layer block exported with its products on BLAS, any batch: (block, prefix)."""
    directory = tmp_path_factory.mktemp("blas_plan")
    mx.random.seed(5)
    block = _Dense()
    block.initialize(mx.init.Uniform(0.7))
    block.hybridize()
    compiled = compile_block(block, mx.nd.array(uniform((4, 16), seed=13)),
                             symbolic_dims={0: {0: "batch"}}, cache_dir=str(directory / "cache"),
                             choose_by_measurement=False, gemms="blas")
    assert compiled.report()["segments"][0]["blas_gemms"] == {"(batch)x16x24 B^T": 1,
                                                              "(batch)x24x3 B^T": 1}
    prefix = str(directory / "dense")
    compiled.export(prefix)
    return block, prefix


def test_an_exported_plan_calling_blas_runs_in_python(blas_plan):
    block, prefix = blas_plan
    with open(prefix + "-segment0-tvm.json") as f:
        signature = json.load(f)
    assert signature["format"] == runtime.MANIFEST_FORMAT == 3
    assert signature["external"] == [{"library": "libopenblas.so.0", "symbol": "cblas_sgemm"}]
    plan = load_plan(prefix)
    for batch in (1, 4, 9):
        x = mx.nd.array(uniform((batch, 16), seed=batch))
        _assert_close(plan(x).asnumpy(), block(x).asnumpy())
    assert plan.plan_calls == 3 and plan.graph_calls == 0


@pytest.mark.parametrize("entry, message", [
    ({"library": "../mxnet/libopenblas.so.0", "symbol": "cblas_sgemm"},
     "external library '../mxnet/libopenblas.so.0': a file name of the mxnet package is "
     "expected, not a path"),
    ({"library": "libnothing.so", "symbol": "cblas_sgemm"},
     "external library libnothing.so: .*libnothing.so does not exist"),
    ({"library": "libopenblas.so.0", "symbol": "cblas_nothing"},
     "external library libopenblas.so.0 has no function cblas_nothing"),
    ({"library": "libopenblas.so.0"}, "an external function must name its library and symbol"),
])
def test_a_signature_naming_external_functions_the_process_lacks_fails_to_load(
        blas_plan, tmp_path, entry, message):
    _, prefix = blas_plan
    library, signature = (shutil.copy(prefix + suffix, str(tmp_path / ("copy" + suffix)))
                          for suffix in ("-segment0-tvm.so", "-segment0-tvm.json"))
    with open(signature) as f:
        manifest = json.load(f)
    manifest["external"] = [entry]
    with open(signature, "w") as f:
        json.dump(manifest, f)
    with pytest.raises((ValueError, OSError), match=message):
        runtime.load_library(library, signature)
    assert os.path.exists(library)
