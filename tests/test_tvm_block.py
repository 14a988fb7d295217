"""compile_block: static HybridBlocks (LeNet, an unrolled LSTM) on TVM where it is
faster; outputs match MXNet, trained parameters are picked up, the plan is
reported, and a one-segment plan exports for a process without gluon_dyn."""
import subprocess
import sys

import mxnet as mx
import numpy as np
import pytest

from tvm_bridge import compile_block, deploy
from test_tvm_models import UnrolledLSTM, initialized, lenet, sequence_batch


def assert_matches_block(compiled, block, *inputs):
    expected = block(*inputs)
    got = compiled(*inputs)
    for e, g in zip(*(v if isinstance(v, list) else [v] for v in (expected, got))):
        np.testing.assert_allclose(g.asnumpy(), e.asnumpy(), rtol=1e-5, atol=1e-5)


def test_lenet_matches_mxnet_and_reports_its_plan(tmp_path):
    net = initialized(lenet())
    x = mx.nd.array(np.random.RandomState(0).randn(2, 1, 16, 16))
    compiled = compile_block(net, x, cache_dir=str(tmp_path))
    assert_matches_block(compiled, net, x)
    report = compiled.report()
    assert report["segments"] and all(s["backend"] in ("tvm", "mxnet") for s in report["segments"])
    assert report["plan_ms"] > 0 and report["whole_graph_mxnet_ms"] > 0


def test_trained_parameters_are_read_at_each_call(tmp_path):
    net = initialized(UnrolledLSTM())
    inputs = [mx.nd.array(a) for a in sequence_batch(2)]
    compiled = compile_block(net, *inputs, symbolic_dims={0: {1: "batch"}, 1: {0: "batch"}},
                             cache_dir=str(tmp_path))
    assert_matches_block(compiled, net, *inputs)
    for param in net.collect_params().values():
        param.set_data(param.data() * 0.5 + 0.01)
    assert_matches_block(compiled, net, *inputs)
    bigger = [mx.nd.array(a) for a in sequence_batch(3)]
    assert_matches_block(compiled, net, *bigger)


def test_export_loads_in_a_process_without_gluon_dyn(tmp_path):
    net = initialized(UnrolledLSTM())
    inputs = [mx.nd.array(a) for a in sequence_batch(2)]
    compiled = compile_block(net, *inputs, cache_dir=str(tmp_path / "cache"),
                             choose_by_measurement=False)
    prefix = str(tmp_path / "model")
    compiled.export(prefix)
    for k, array in enumerate(inputs):
        np.save(str(tmp_path / ("input%d.npy" % k)), array.asnumpy())
    expected = net(*inputs)
    np.save(str(tmp_path / "expected.npy"),
            (expected[0] if isinstance(expected, list) else expected).asnumpy())
    script = """
import importlib.util, json, sys
import mxnet as mx, numpy as np
spec = importlib.util.spec_from_file_location("runtime", %r)
runtime = importlib.util.module_from_spec(spec); spec.loader.exec_module(runtime)
prefix = %r
function = runtime.load_library(prefix + "-tvm.so", prefix + "-tvm.json")
params = {k.split(":", 1)[1]: v for k, v in mx.nd.load(prefix + "-0000.params").items()}
data = {"data%%d" %% k: mx.nd.array(np.load(%r %% k)) for k in range(%d)}
names = [spec.name for spec in function.signature.inputs]
out = function(*[data[n] if n in data else params[n] for n in names])
out = out if isinstance(out, list) else [out]
out = out[json.load(open(prefix + "-tvm.json"))["graph_outputs"][0]]
np.testing.assert_allclose(out.asnumpy(), np.load(%r), rtol=1e-5, atol=1e-5)
assert not [m for m in sys.modules if m.startswith(("gluon_dyn", "tvm_bridge"))]
print("ok")
""" % (deploy.standalone_loader_path(), prefix, str(tmp_path / "input%d.npy"), len(inputs),
       str(tmp_path / "expected.npy"))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-2000:]


class QuadraticInTheMiddle(mx.gluon.HybridBlock):
    """An op with no TVM converter between two layers: always three segments."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.first = mx.gluon.nn.Dense(4, in_units=3)
            self.second = mx.gluon.nn.Dense(2, in_units=4)

    def hybrid_forward(self, F, x):
        return self.second(F.contrib.quadratic(self.first(x), a=1.0, b=2.0, c=3.0))


def test_a_plan_with_mxnet_segments_runs_but_is_not_exported_as_one_library(tmp_path):
    net = initialized(QuadraticInTheMiddle())
    x = mx.nd.array(np.random.RandomState(0).randn(2, 3))
    compiled = compile_block(net, x, cache_dir=str(tmp_path), choose_by_measurement=False)
    assert_matches_block(compiled, net, x)
    assert [s["convertible"] for s in compiled.report()["segments"]] == [True, False, True]
    with pytest.raises(ValueError, match="one TVM segment"):
        compiled.export(str(tmp_path / "model"))
