"""The Java binding (build/gluon_dyn.jar) against Python, each run in a fresh JVM started with
nothing but PATH set: tests/native/RunModel.java (run_model.c's twin) runs exported models
through gluondyn.Model on calls that take every branch and many lengths, and the outputs must
equal the block's; failures throw GluonDynException with the C runtime's message and leave the
model usable. Skipped, saying so, where the JDK's javac is missing (make does not build the
jar there)."""
import os
import shutil
import subprocess

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon

from deploy_models import (FEATURES, Mlp, Refiner, assert_same, export_plan, export_tagger,
                           initialized, python_outputs, refiner_calls, tagger_calls)
from native_runtime import BUILD, REPO, clean_environment, read_results, write_calls

JAR = os.path.join(BUILD, "gluon_dyn.jar")
pytestmark = pytest.mark.skipif(shutil.which("javac") is None,
                                reason="javac not found: the Java binding is not built")


@pytest.fixture(scope="module")
def classes(tmp_path_factory):
    """tests/native's Java programs compiled against the jar."""
    assert os.path.exists(JAR), "%s is missing: `make java` builds it" % JAR
    directory = tmp_path_factory.mktemp("java")
    sources = [os.path.join(REPO, "tests", "native", name)
               for name in ("RunModel.java", "JavaApiChecks.java")]
    subprocess.run(["javac", "-Xlint:all", "-Werror", "-cp", JAR, "-d", str(directory)] + sources,
                   check=True)
    return str(directory)


def java(classes, program, args, jar=JAR):
    done = subprocess.run(["java", "-cp", "%s:%s" % (jar, classes), program] + list(args),
                          capture_output=True, text=True, timeout=600, env=clean_environment())
    return done


def run_java(classes, prefix, calls, tmp_path, jar=JAR):
    write_calls(str(tmp_path / "calls.bin"), calls)
    done = java(classes, "RunModel", [prefix, str(tmp_path / "calls.bin"),
                                      str(tmp_path / "results.bin")], jar)
    assert done.returncode == 0, (done.stdout, done.stderr[-3000:])
    return read_results(str(tmp_path / "results.bin")), done.stdout.splitlines()


def test_control_flow_model_matches_python(classes, tmp_path):
    block, prefix = export_tagger(tmp_path)
    calls = tagger_calls(np.random.RandomState(11))
    got, stdout = run_java(classes, prefix, calls, tmp_path)
    assert stdout[0] == "inputs: data0 data1"
    assert_same(got, python_outputs(block, calls), "Java")


def test_tvm_plans_match_python(classes, tmp_path):
    rng = np.random.RandomState(12)
    mlp = initialized(Mlp(), 8)
    _, mlp_prefix = export_plan(mlp, [rng.uniform(-1, 1, (2, FEATURES)).astype("f4")], tmp_path,
                                "mlp", str(tmp_path / "cache"), symbolic_dims={0: {0: "batch"}})
    calls = [[rng.uniform(-1, 1, (batch, FEATURES)).astype("f4")] for batch in (2, 6)]
    got, stdout = run_java(classes, mlp_prefix, calls, tmp_path)
    assert_same(got, python_outputs(mlp, calls), "MLP plan from Java")
    assert stdout[-1] == "report: 2 runs as the plan, 0 as the MXNet graph"
    refiner = initialized(Refiner(), 9)
    calls = refiner_calls(rng, batch=2)
    _, prefix = export_plan(refiner, calls[0], tmp_path, "refiner", str(tmp_path / "cache"))
    calls += refiner_calls(rng, batch=3)[:2]  # other types: the MXNet graph runs them
    got, stdout = run_java(classes, prefix, calls, tmp_path)
    assert_same(got, python_outputs(refiner, calls), "plan around a while_loop and a cond, Java")
    assert stdout[-1].startswith("report: %d runs as the plan, 2 as the MXNet graph" % (
        len(calls) - 2))


def test_failures_carry_the_runtime_message_and_the_model_stays_usable(classes, tmp_path):
    block, prefix = export_tagger(tmp_path)
    good = tagger_calls(np.random.RandomState(13))[:2]
    seq, steps = good[0]
    calls = [[seq], good[0], [seq[:, :, :3].copy(), steps], good[1],
             [np.zeros((0, 2, FEATURES), "f4"), steps], good[0]]
    got, _ = run_java(classes, prefix, calls, tmp_path)
    assert got[0] == "gd_model_run: the model takes 2 inputs (data0, data1), got 1"
    assert got[2].startswith("gd_model_run: the graph rejects input data0 of shape (3, 2, 3): ")
    assert got[4] == "gd_model_run: input data0: shape (0, 2, 4) has a dimension below 1"
    assert_same(got[1::2], python_outputs(block, [good[0], good[1], good[0]]), "Java, after failures")
    done = java(classes, "RunModel", [str(tmp_path / "missing"), "/dev/null", "/dev/null"])
    assert done.returncode == 2
    assert done.stdout.startswith("load failed: gd_model_load: %s-checksums.json: cannot be "
                                  "opened (No such file or directory); every export by gluon_dyn "
                                  "writes this record" % (tmp_path / "missing")), done.stdout


def test_java_api_checks(classes, tmp_path):
    dense = gluon.nn.Dense(2, in_units=3)
    dense.initialize()
    dense.hybridize()
    dense(mx.nd.ones((2, 3)))
    dense.export(str(tmp_path / "dense"))
    done = java(classes, "JavaApiChecks", [str(tmp_path / "dense")])
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == [
        "tensor data does not fit: shape [2, 3] does not hold 5 elements",
        "tensor negative dim: shape [2, -3] has a negative dimension",
        "outputs: 1",
        "two inputs: gd_model_run: the model takes 1 input (data), got 2",
        "null input: Model.run: input 0 is null",
        "after failures: 2",
        "report: 0 runs as the plan, 2 as the MXNet graph",
        "closed: Model.run: the model is closed",
        "closed report: Model.report: the model is closed"]


def test_the_jar_alone_carries_its_native_library(classes, tmp_path):
    block, prefix = export_tagger(tmp_path)
    alone = tmp_path / "elsewhere"
    alone.mkdir()
    shutil.copy(JAR, alone / "gluon_dyn.jar")
    assert not (alone / "libgluon_dyn_jni.so").exists()
    calls = tagger_calls(np.random.RandomState(14))[:3]
    got, _ = run_java(classes, prefix, calls, tmp_path, jar=str(alone / "gluon_dyn.jar"))
    assert_same(got, python_outputs(block, calls), "Java with the jar alone")
