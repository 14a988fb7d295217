"""Integrity of exported files: export records the size and CRC-32 of every file it writes
(prefix-checksums.json, gluon_dyn/graph_files/checksums.py), and the C runtime and the Java binding
refuse, naming the file, every damaged copy of a model: truncated, bit-flipped, zeroed,
overwritten with garbage or extended, whichever file it is (parameters, graph, plan, TVM
library, signature, the record itself). A model without a record is refused until one is
recorded; a plan an earlier export left beside a model is refused."""
import json
import os
import shutil
import subprocess
import sys
import zlib

import mxnet as mx
import numpy as np
import pytest

from corruption import KINDS, damaged_copies
from deploy_models import FEATURES, Mlp, export_plan, initialized
from native_runtime import (BUILD, REPO, RUN_MODEL_SOURCE, clean_environment, compile_c,
                            run_model)

TESTS_NATIVE = os.path.join(REPO, "tests", "native")
JAR = os.path.join(BUILD, "gluon_dyn.jar")
HAS_JAVA = shutil.which("javac") is not None


@pytest.fixture(scope="module")
def c_loader(tmp_path_factory):
    return compile_c(os.path.join(TESTS_NATIVE, "load_models.c"),
                     str(tmp_path_factory.mktemp("c") / "load_models"))


@pytest.fixture(scope="module")
def java_classes(tmp_path_factory):
    if not HAS_JAVA:
        return None
    assert os.path.exists(JAR), "%s is missing: `make java` builds it" % JAR
    directory = str(tmp_path_factory.mktemp("java"))
    subprocess.run(["javac", "-Xlint:all", "-Werror", "-cp", JAR, "-d", directory,
                    os.path.join(TESTS_NATIVE, "LoadModels.java")], check=True)
    return directory


@pytest.fixture(scope="module")
def deploy_example(tmp_path_factory):
    """The prefix of examples/deploy's model, trained and exported as its README says."""
    directory = tmp_path_factory.mktemp("deploy")
    done = subprocess.run([sys.executable, os.path.join(REPO, "examples", "deploy",
                                                        "train_and_export.py"),
                           str(directory / "model")], capture_output=True, text=True,
                          timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    return str(directory / "model")


@pytest.fixture(scope="module")
def tvm_plan(tmp_path_factory):
    """The prefix of an MLP exported by tvm_bridge as a plan with one TVM segment."""
    directory = tmp_path_factory.mktemp("plan")
    example = [np.random.RandomState(3).uniform(-1, 1, (2, FEATURES)).astype("f4")]
    return export_plan(initialized(Mlp(), 5), example, directory, "mlp",
                       str(directory / "cache"))[1]


def loads(c_loader, java_classes, prefixes):
    """{runtime: {prefix: None if it loaded, else the message}} from one C process and one
    JVM, each started with nothing set."""
    commands = {"C": [c_loader]}
    if java_classes is not None:
        commands["Java"] = ["java", "-cp", "%s:%s" % (JAR, java_classes), "LoadModels"]
    results = {}
    for runtime, command in commands.items():
        done = subprocess.run(command + list(prefixes), capture_output=True, text=True,
                              timeout=600, env=clean_environment())
        assert done.returncode == 0, (runtime, done.stdout[-2000:], done.stderr[-2000:])
        lines = done.stdout.splitlines()
        assert len(lines) == len(prefixes), (runtime, lines)
        results[runtime] = {}
        for prefix, line in zip(prefixes, lines):
            if line == "loaded " + prefix:
                results[runtime][prefix] = None
            else:
                assert line.startswith("refused %s: " % prefix), line
                results[runtime][prefix] = line[len("refused %s: " % prefix):]
    return results


def record_of(prefix):
    with open(prefix + "-checksums.json") as f:
        text = f.read()
    record = json.loads(text)
    # Compact: no byte of it is mere layout, each one changes what it says if damaged.
    assert text == json.dumps(record, separators=(",", ":"), sort_keys=True)
    return record


def checksum(path):
    with open(path, "rb") as f:
        data = f.read()
    return {"bytes": len(data), "crc32": zlib.crc32(data)}


def test_export_records_the_size_and_crc_of_every_file_it_writes(deploy_example, tvm_plan):
    record = record_of(deploy_example)
    assert {k: v for k, v in record.items() if k != "files"} == {
        "kind": "gluon_dyn export checksums", "version": 1, "algorithm": "crc32"}
    assert record["files"] == {suffix: checksum(deploy_example + suffix)
                               for suffix in ("-symbol.json", "-0000.params")}
    with open(tvm_plan + "-plan.json") as f:
        (step,) = [s for s in json.load(f)["steps"] if s["backend"] == "tvm"]
    directory = os.path.dirname(tvm_plan)
    named = [step["library"], step["signature"]]
    assert record_of(tvm_plan)["files"] == {
        suffix: checksum(tvm_plan + suffix)
        for suffix in ["-symbol.json", "-0000.params", "-plan.json"] +
        [name[len("mlp"):] for name in named]}
    assert all(os.path.exists(os.path.join(directory, name)) for name in named)
    # MXNet's own files are MXNet's: it loads them as they are.
    assert mx.sym.load(deploy_example + "-symbol.json").list_outputs()
    assert mx.nd.load(deploy_example + "-0000.params")


@pytest.mark.parametrize("model", ["deploy_example", "tvm_plan"])
def test_every_damaged_copy_is_refused_naming_the_file(c_loader, java_classes, model, request,
                                                       tmp_path):
    prefix = request.getfixturevalue(model)
    rng = np.random.RandomState(sum(map(ord, model)))
    copies = damaged_copies(prefix, tmp_path, rng)
    assert {kind for _, _, kind in copies} == set(KINDS)
    damaged_files = {os.path.basename(path)[len("damaged000"):] for _, path, _ in copies}
    assert {"-symbol.json", "-0000.params", "-checksums.json"} <= damaged_files
    results = loads(c_loader, java_classes, [prefix] + [p for p, _, _ in copies])
    for runtime, outcome in results.items():
        assert outcome[prefix] is None, (runtime, "the undamaged model", outcome[prefix])
        for copy_prefix, path, kind in copies:
            message = outcome[copy_prefix]
            assert message is not None, (runtime, "loaded a damaged copy", path, kind)
            assert message.startswith("gd_model_load: "), (runtime, message)
            # A damaged record is named in every message about it.
            assert path in message or copy_prefix + "-checksums.json" in message, (
                runtime, path, kind, message)


def export_with_mxnet_alone(prefix):
    """A Dense layer exported by MXNet in a process that never imports gluon_dyn: MXNet's
    two files, no record."""
    code = ("import mxnet as mx, sys\n"
            "net = mx.gluon.nn.Dense(2, in_units=3)\n"
            "net.initialize(mx.init.Uniform(1.0))\n"
            "net.hybridize()\n"
            "net(mx.nd.ones((1, 3)))\n"
            "net.export(sys.argv[1])\n"
            "print(net(mx.nd.array([[0.5, -1, 2], [0.25, 3, -0.75]])).asnumpy().tolist())\n")
    done = subprocess.run([sys.executable, "-c", code, prefix], capture_output=True, text=True,
                          timeout=300, env={"PATH": os.environ.get("PATH", "")})
    assert done.returncode == 0, done.stderr[-2000:]
    return np.array(json.loads(done.stdout.splitlines()[-1]), dtype="f4")


def test_a_model_without_a_record_is_refused_until_one_is_recorded(c_loader, java_classes,
                                                                   tmp_path):
    prefix = str(tmp_path / "plain")
    expected = export_with_mxnet_alone(prefix)
    assert not os.path.exists(prefix + "-checksums.json")
    for runtime, outcome in loads(c_loader, java_classes, [prefix]).items():
        assert outcome[prefix].startswith("gd_model_load: %s-checksums.json: cannot be opened"
                                          % prefix), (runtime, outcome[prefix])
        assert "python -m gluon_dyn.export.record_checksums %s" % prefix in outcome[prefix]
    done = subprocess.run([sys.executable, "-m", "gluon_dyn.export.record_checksums", prefix],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0 and done.stdout == "recorded %s-checksums.json\n" % prefix, \
        done.stderr[-2000:]
    runner = compile_c(RUN_MODEL_SOURCE, str(tmp_path / "run_model"))
    inputs = np.array([[0.5, -1, 2], [0.25, 3, -0.75]], dtype="f4")
    (outputs,), _ = run_model(runner, prefix, [[inputs]], str(tmp_path))
    np.testing.assert_allclose(outputs[0], expected, rtol=1e-6)


def test_a_plan_left_by_an_earlier_export_is_refused(c_loader, java_classes, tvm_plan, tmp_path):
    directory = os.path.dirname(tvm_plan)
    prefix = str(tmp_path / "mlp")
    for name in os.listdir(directory):
        if name.startswith("mlp-"):
            shutil.copy(os.path.join(directory, name), str(tmp_path / name))
    block = initialized(Mlp(), 6)
    block.hybridize()
    block(mx.nd.ones((2, FEATURES)))
    block.export(prefix)   # a new model where the plan was: the plan is not its own
    assert set(record_of(prefix)["files"]) == {"-symbol.json", "-0000.params"}
    for runtime, outcome in loads(c_loader, java_classes, [prefix]).items():
        assert outcome[prefix] == (
            "gd_model_load: %s-plan.json: not among the files %s-checksums.json records (left "
            "by another export?); export the model again" % (prefix, prefix)), runtime
