"""An exported function runs in a fresh process that imports only runtime.py, tvm and mxnet."""
import numpy as np

from tvm_bridge import compiler, deploy, sample_modules
from tvm_runtime_helpers import lstm_reference, random_inputs, run_python

FRESH_PROCESS = """
import importlib.util, sys
import mxnet as mx, numpy as np
spec = importlib.util.spec_from_file_location("standalone_runtime", {loader!r})
runtime = importlib.util.module_from_spec(spec)
spec.loader.exec_module(runtime)
fn = runtime.load_library({prefix!r} + "-tvm.so", {prefix!r} + "-tvm.json")
inputs = [mx.nd.array(a) for a in np.load({inputs!r}).values()]
outputs = fn(*inputs)
np.savez({outputs!r}, *[o.asnumpy() for o in outputs])
leaked = sorted(m for m in sys.modules if m.split(".")[0] in ("gluon_dyn", "tvm_bridge"))
print(fn.copies, fn.signature.inputs[0].shape, leaked)
"""


def test_export_and_load_in_a_fresh_process(tmp_path):
    compiled = compiler.compile_module(
        sample_modules.lstm(steps=3, batch="batch", in_dim=8, hidden=16), cache_dir=str(tmp_path))
    prefix = str(tmp_path / "export" / "model")
    deploy.export(compiled, prefix)
    inputs = [a.asnumpy() for a in random_inputs(compiled.signature, {"batch": 3})]
    np.savez(tmp_path / "inputs.npz", *inputs)
    report = run_python(FRESH_PROCESS.format(
        loader=deploy.standalone_loader_path(), prefix=prefix,
        inputs=str(tmp_path / "inputs.npz"), outputs=str(tmp_path / "outputs.npz")))
    assert report.strip() == "0 (3, 'batch', 8) []"
    outputs = np.load(tmp_path / "outputs.npz")
    for got, want in zip(outputs.values(), lstm_reference(*inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_freshly_compiled_function_exports_and_loads_in_process(tmp_path):
    compiled = compiler.compile_module(sample_modules.mlp(), use_cache=False)
    prefix = str(tmp_path / "mlp")
    deploy.export(compiled, prefix)
    loaded = deploy.load(prefix)
    inputs = random_inputs(compiled.signature)
    np.testing.assert_array_equal(loaded(*inputs)[0].asnumpy(), compiled(*inputs)[0].asnumpy())
