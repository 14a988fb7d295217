"""Tuning records tvm_bridge's own schedule of each kernel beside meta-schedule's
candidates (tuning_baseline.py), so a tuned schedule replaces it only where it
measured faster; which one wins is timing and is not asserted."""
import mxnet as mx
import numpy as np

from tvm_bridge import build_graph_module, cache, compiler
from tvm_helpers import make_inputs, run_mxnet
from tvm_runtime_helpers import run_python

S = mx.sym
SHAPES = {"data": (2, 3, 12, 12), "weight": (8, 3, 5, 5)}
# In a process of its own: meta-schedule's logging set-up fails in a second tuning
# run of a pytest process (it lists pytest's unnamed capture handlers by name).
TUNE = """
import sys
sys.path.insert(0, "tests")
from test_tvm_tuning_baseline import module
from tvm_bridge import tuning
print(tuning.tune_module(module()[0], trials=2, progress=False)["database"])
"""


def symbol():
    return S.Pooling(S.relu(S.Convolution(S.var("data"), S.var("weight"), S.var("bias"),
                                          kernel=(5, 5), num_filter=8)),
                     kernel=(2, 2), stride=(2, 2))


def module():
    """(module, its input names) of a convolution, bias, relu and max pool."""
    mod, input_names, _ = build_graph_module(symbol(), SHAPES)
    return mod, input_names


def test_each_kernel_a_default_rule_takes_has_its_default_schedule_recorded(tmp_path):
    database = run_python(TUNE, env={cache.CACHE_ENV: str(tmp_path)}).split()[-1]
    recorded = {str(record.trace)
                for record in compiler.tuning_database(database).get_all_tuning_records()}
    mod, input_names = module()
    target = compiler.host_target()
    defaults = [next((s for s in (rule.apply(kernel, target, False)
                                  for rule in compiler.default_rules()) if s is not None), None)
                for kernel in compiler.fuse(mod, target).functions.values()]
    defaults = [str(schedule.trace) for schedule in defaults if schedule is not None]
    assert any("compute_at" in trace for trace in defaults)  # the convolution's
    assert all(trace in recorded for trace in defaults)
    tuned = compiler.compile_module(mod, cache_dir=str(tmp_path))
    assert tuned.info["tuned"]
    inputs = make_inputs(symbol(), SHAPES)
    (expected,) = run_mxnet(symbol(), inputs)
    (got,) = tuned(*[inputs[name] for name in input_names])
    np.testing.assert_allclose(got.asnumpy(), expected, rtol=1e-5, atol=1e-5)
