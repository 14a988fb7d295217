"""tvm_bridge plans in deploy_loader.py (Python without gluon_dyn): plans that keep a
`_while_loop` and a `_cond` export and run, TVM steps checking the types they were compiled for
at each call (a call whose types differ runs as the MXNet graph); the plan's version and its
libraries are checked before anything is loaded. The C runtime reads the same plans
(test_c_runtime.py)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from deploy_models import (Mlp, Refiner, assert_same, copy_model, export_plan, initialized,
                           python_outputs, refiner_calls)
from tvm_bridge import deploy_loader

FRESH_PROCESS = """
import importlib.util, json, sys
import mxnet as mx, numpy as np
spec = importlib.util.spec_from_file_location("deploy_loader", {loader!r})
loader = importlib.util.module_from_spec(spec)
spec.loader.exec_module(loader)
plan = loader.load_plan({prefix!r})
calls = np.load({calls!r})
outputs = []
for k in range(len(calls.files) // 2):
    out = plan(mx.nd.array(calls["x%d" % k]), mx.nd.array(calls["steps%d" % k]))
    outputs += [o.asnumpy() for o in out]
np.savez({outputs!r}, *outputs)
print(json.dumps([plan.plan_calls, plan.graph_calls, plan.last_difference,
                  sorted(m for m in sys.modules if m.split(".")[0] in ("gluon_dyn", "tvm_bridge"))]))
"""


def run_fresh(prefix, calls, tmp_path):
    np.savez(tmp_path / "calls.npz", **{"%s%d" % (name, k): array for k, call in enumerate(calls)
                                        for name, array in zip(("x", "steps"), call)})
    script = FRESH_PROCESS.format(loader=deploy_loader.__file__, prefix=prefix,
                                  calls=str(tmp_path / "calls.npz"),
                                  outputs=str(tmp_path / "outputs.npz"))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    arrays = np.load(tmp_path / "outputs.npz")
    flat = [arrays["arr_%d" % k] for k in range(len(arrays.files))]
    return [flat[2 * k:2 * k + 2] for k in range(len(calls))], json.loads(done.stdout)


def test_a_plan_keeping_a_while_loop_and_a_cond_runs_without_the_project(tmp_path):
    block = initialized(Refiner(), 6)
    rng = np.random.RandomState(9)
    calls = refiner_calls(rng, batch=2)
    compiled, prefix = export_plan(block, calls[0], tmp_path, "refiner", str(tmp_path / "cache"))
    steps = json.load(open(prefix + "-plan.json"))["steps"]
    assert [s["backend"] for s in steps].count("tvm") >= 2
    other_batch = refiner_calls(rng, batch=3)[:2]
    got, (plan_calls, graph_calls, difference, modules) = run_fresh(prefix, calls + other_batch,
                                                                    tmp_path)
    assert_same(got, python_outputs(block, calls + other_batch), "deploy_loader")
    assert (plan_calls, graph_calls) == (len(calls), len(other_batch))
    assert "refiner-segment" in difference and "expected 2, got 3" in difference
    assert modules == []


@pytest.fixture(scope="module")
def mlp_prefix(tmp_path_factory):
    directory = tmp_path_factory.mktemp("plan")
    example = [np.random.RandomState(10).uniform(-1, 1, (2, 4)).astype("f4")]
    return export_plan(initialized(Mlp(), 7), example, directory, "mlp",
                       str(directory / "cache"))[1]


def rewrite_plan(path, edit):
    plan = json.load(open(path))
    edit(plan)
    json.dump(plan, open(path, "w"))


def test_plan_versions_are_checked(mlp_prefix, tmp_path):
    assert deploy_loader.load_plan(mlp_prefix).manifest["version"] == deploy_loader.PLAN_VERSION
    cases = [(lambda plan: plan.update(version=deploy_loader.PLAN_VERSION + 1),
              r"plan version 3 is newer than the version this loader reads \(2\)"),
             (lambda plan: plan.update(version=1), "plan version 1 is older than"),
             (lambda plan: plan.update(version="2"), "the plan's version '2' is not a number"),
             (lambda plan: plan.pop("version"), "a plan without a version number"),
             (lambda plan: plan.update(kind="other"), "not a tvm_bridge plan")]
    for k, (edit, message) in enumerate(cases):
        prefix, files = copy_model(mlp_prefix, tmp_path, "case%d" % k)
        rewrite_plan(files["-plan.json"], edit)
        with pytest.raises(ValueError, match=message):
            deploy_loader.load_plan(prefix)


def test_a_damaged_segment_library_is_refused_before_loading(mlp_prefix, tmp_path):
    prefix, files = copy_model(mlp_prefix, tmp_path, "damaged")
    library = files["-segment0-tvm.so"]
    content = open(library, "rb").read()
    open(library, "wb").write(content[:len(content) // 3])
    with pytest.raises(ValueError, match="damaged-segment0-tvm.so: not the library the plan was "
                                         "exported with .*truncated or damaged"):
        deploy_loader.load_plan(prefix)
    os.remove(library)
    with pytest.raises(FileNotFoundError, match="segment0-tvm.so: the plan's TVM library"):
        deploy_loader.load_plan(prefix)
