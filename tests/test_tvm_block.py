"""compile_block: static HybridBlocks (LeNet, an unrolled LSTM, a GRU loop, a
Tree-LSTM) on TVM where it is faster; outputs match MXNet, trained parameters
are picked up, the plan is reported, and exported plans run in a process
without gluon_dyn or tvm_bridge. Which backend wins is never asserted: results
are checked on plans forced onto TVM (asserted), the report on measured ones."""
import os
import subprocess
import sys

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon

import test_tvm_models
from test_tvm_models import (LEAVES, ChildSumTreeLSTM, UnrolledGRU, UnrolledLSTM, initialized,
                             lenet, sequence_batch)
import tvm_bridge
from tvm_bridge import compile_block

BATCH_DIMS = {0: {1: "batch"}, 1: {0: "batch"}}  # (steps, batch, features), (batch, hidden)
DEPLOY_LOADER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                             "tvm_bridge", "deploy_loader.py")


def as_list(value):
    return value if isinstance(value, (list, tuple)) else [value]


def assert_matches_block(compiled, block, *inputs):
    expected, got = as_list(block(*inputs)), as_list(compiled(*inputs))
    assert len(got) == len(expected)
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g.asnumpy(), e.asnumpy(), rtol=1e-5, atol=1e-5)


def assert_report_lists_segments(report):
    """A measured plan's report says what its measurements chose (which is never asserted)."""
    assert report["failures"] == [] and report["segments"]
    assert report["runs"] == ("segments" if report["choice"]["chosen"] == "plan" else
                              "one MXNet graph (measured faster than the plan)")
    last = report["choice"]["history"][-1]["times_ms"]
    assert (report["plan_ms"], report["whole_graph_mxnet_ms"]) == (last["plan"],
                                                                   last["whole graph"])
    for segment in report["segments"]:
        assert segment["ops"] == sum(segment["op_names"].values()) > 0
        if segment["convertible"]:   # compiled (no failures): timed both ways
            assert set(segment["times_ms"]) == {"tvm", "mxnet"}
            assert segment["backend"] == segment["choice"]["chosen"]
        else:
            assert segment["backend"] == "mxnet" and segment["choice"] is None


def on_tvm(block, *inputs, **options):
    """compile_block with every segment TVM compiles kept on TVM (asserted)."""
    compiled = compile_block(block, *inputs, choose_by_measurement=False, **options)
    report = compiled.report()
    assert report["runs"] == "segments" and all(
        segment["backend"] == "tvm" for segment in report["segments"] if segment["convertible"])
    return compiled


def images(size):
    return mx.nd.array(np.random.RandomState(size).uniform(-1, 1, (size, 1, 16, 16)))


def test_lenet_matches_mxnet_and_reports_its_plan(tmp_path):
    net = initialized(lenet())
    assert_matches_block(on_tvm(net, images(2), cache_dir=str(tmp_path)), net, images(2))
    measured = compile_block(net, images(2), cache_dir=str(tmp_path))
    assert_matches_block(measured, net, images(2))
    assert_report_lists_segments(measured.report())
    assert "Convolution" in measured.report()["segments"][0]["op_names"]


def test_a_weight_mxnet_reordered_for_onednn_is_read_in_its_plain_layout(tmp_path):
    """MXNet's oneDNN convolution keeps an inference weight in a blocked layout,
    in the array's own memory; the TVM view taken before must not read that."""
    net = initialized(gluon.nn.Conv2D(16, kernel_size=3, in_channels=6))
    image = mx.nd.array(np.random.RandomState(1).uniform(-1, 1, (1, 6, 8, 8)))
    compiled = compile_block(net, image, cache_dir=str(tmp_path), choose_by_measurement=False)
    assert compiled.report()["segments"][0]["backend"] == "tvm"
    for _ in range(2):
        expected = net(image).asnumpy()  # MXNet's kernel: the weight is reordered
        np.testing.assert_allclose(compiled(image).asnumpy(), expected, rtol=1e-5, atol=1e-5)


def test_lstm_of_ten_steps_reads_trained_parameters_at_each_call(tmp_path, monkeypatch):
    monkeypatch.setattr(test_tvm_models, "STEPS", 10)
    net = initialized(UnrolledLSTM())
    inputs = [mx.nd.array(a) for a in sequence_batch(2)]
    compiled = on_tvm(net, *inputs, symbolic_dims=BATCH_DIMS, cache_dir=str(tmp_path))
    assert_matches_block(compiled, net, *inputs)
    for param in net.collect_params().values():
        param.set_data(param.data() * 0.5 + 0.01)
    assert_matches_block(compiled, net, *inputs)
    assert_matches_block(compiled, net, *[mx.nd.array(a) for a in sequence_batch(3)])


def test_gru_loop_matches_mxnet(tmp_path):
    net = initialized(UnrolledGRU())
    compiled = on_tvm(net, *[mx.nd.array(a) for a in sequence_batch(2)],
                      symbolic_dims=BATCH_DIMS, cache_dir=str(tmp_path))
    for size in (2, 5):
        assert_matches_block(compiled, net, *[mx.nd.array(a) for a in sequence_batch(size)])


def test_tree_lstm_on_a_fixed_tree_matches_mxnet(tmp_path):
    net = initialized(ChildSumTreeLSTM())
    leaves = mx.nd.array(np.random.RandomState(0).uniform(-1, 1, (3, LEAVES, 16)))
    assert_matches_block(on_tvm(net, leaves, cache_dir=str(tmp_path)), net, leaves)


class QuadraticInTheMiddle(mx.gluon.HybridBlock):
    """An op with no TVM converter between two layers: always three segments."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.first = mx.gluon.nn.Dense(4, in_units=3)
            self.second = mx.gluon.nn.Dense(2, in_units=4)

    def hybrid_forward(self, F, x):
        return self.second(F.contrib.quadratic(self.first(x), a=1.0, b=2.0, c=3.0))


def test_a_plan_with_an_mxnet_segment_matches_mxnet(tmp_path):
    net = initialized(QuadraticInTheMiddle())
    x = mx.nd.array(np.random.RandomState(0).randn(2, 3))
    compiled = compile_block(net, x, cache_dir=str(tmp_path), choose_by_measurement=False)
    assert_matches_block(compiled, net, x)
    report = compiled.report()
    assert [s["convertible"] for s in report["segments"]] == [True, False, True]
    assert [s["backend"] for s in report["segments"]] == ["tvm", "mxnet", "tvm"]
    assert report["plan_ms"] is None  # nothing was timed
    with mx.autograd.record(), pytest.raises(RuntimeError, match="inference only"):
        compiled(x)
    with pytest.raises(TypeError, match="takes 1 inputs, got 2"):
        compiled(x, x)
    with pytest.raises(ValueError, match=r"input 'data': the plan was built for shape \(2, 3\)"):
        compiled(mx.nd.ones((2, 5)))


FRESH_PROCESS = """
import importlib.util, sys
import mxnet as mx, numpy as np
spec = importlib.util.spec_from_file_location("deploy_loader", {loader!r})
loader = importlib.util.module_from_spec(spec)
spec.loader.exec_module(loader)
for prefix in {prefixes!r}:
    plan = loader.load_plan(prefix)
    outputs = plan(*[mx.nd.array(a) for a in np.load(prefix + "-inputs.npz").values()])
    outputs = outputs if isinstance(outputs, list) else [outputs]
    np.savez(prefix + "-outputs.npz", *[o.asnumpy() for o in outputs])
    print([step["backend"] for step in plan.manifest["steps"]])
print(sorted(m for m in sys.modules if m.split(".")[0] in ("gluon_dyn", "tvm_bridge")))
"""


def run_exported(cases, tmp_path):
    """Export each (CompiledBlock, inputs) and run the plans in one fresh process;
    per case its outputs and its steps' backends, then the project modules loaded."""
    prefixes = [str(tmp_path / ("model%d" % k)) for k in range(len(cases))]
    for prefix, (compiled, inputs) in zip(prefixes, cases):
        compiled.export(prefix)
        np.savez(prefix + "-inputs.npz", *[a.asnumpy() for a in inputs])
    script = FRESH_PROCESS.format(loader=DEPLOY_LOADER, prefixes=prefixes)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    outputs = [np.load(prefix + "-outputs.npz") for prefix in prefixes]
    return ([[out["arr_%d" % k] for k in range(len(out.files))] for out in outputs],
            done.stdout.strip().splitlines())


def test_exported_plans_run_in_a_fresh_process_without_the_project(tmp_path):
    cache = str(tmp_path / "cache")
    split_net = initialized(QuadraticInTheMiddle())
    x = mx.nd.array(np.random.RandomState(0).randn(2, 3))
    split = compile_block(split_net, x, cache_dir=cache, choose_by_measurement=False)
    whole = compile_block(split_net, x, cache_dir=cache, choose_by_measurement=False)
    whole.plan.uses_whole_graph = True  # as when one MXNet graph measures faster
    lstm_net = initialized(UnrolledLSTM())
    lstm = compile_block(lstm_net, *[mx.nd.array(a) for a in sequence_batch(2)],
                         symbolic_dims=BATCH_DIMS, cache_dir=cache, choose_by_measurement=False)
    sequences = [mx.nd.array(a) for a in sequence_batch(3)]  # another batch size
    outputs, printed = run_exported([(split, [x]), (whole, [x]), (lstm, sequences)], tmp_path)
    assert printed == ["['tvm', 'mxnet', 'tvm']", "['mxnet']", "['tvm']", "[]"]
    expected = [[split_net(x)], [split_net(x)], lstm_net(*sequences)]
    in_process = tvm_bridge.load_plan(str(tmp_path / "model2"))(*sequences)
    np.testing.assert_allclose(in_process[0].asnumpy(), expected[2][0].asnumpy(), rtol=1e-5,
                               atol=1e-5)
    for got_case, want_case in zip(outputs, expected):
        assert len(got_case) == len(want_case)
        for got, want in zip(got_case, want_case):
            np.testing.assert_allclose(got, want.asnumpy(), rtol=1e-5, atol=1e-5)
