"""The C runtime (build/libgluon_dyn_runtime.so) against Python.

Models are exported here from HybridBlocks written with gluon_dyn.ops and Dense layers
(deploy_models.py), then run by tests/native/run_model.c, a C program started with no
environment variables, on calls that take every branch and many lengths and trip counts;
outputs must equal the block's. Plans exported by tvm_bridge run too, and the runtime's
report proves which path served the calls (the plan's TVM steps, or the MXNet graph when
the types differ). Bad files and bad inputs fail with messages naming them, and the model
stays usable.
"""
import json
import os
import re
import subprocess

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon

from gluon_dyn import native
from gluon_dyn.graph_files import checksums

from deploy_models import (FEATURES, MAX_STEPS, Looper, Mlp, Refiner, assert_same, copy_model,
                           export_plan, export_tagger, initialized, python_outputs, refiner_calls,
                           tagger_calls)
from native_runtime import (REPO, RUN_MODEL_SOURCE, clean_environment, compile_c, run_model,
                            write_calls)

TESTS_NATIVE = os.path.join(REPO, "tests", "native")


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    return compile_c(RUN_MODEL_SOURCE, str(tmp_path_factory.mktemp("c") / "run_model"))


@pytest.fixture(scope="module")
def tagger(tmp_path_factory):
    return export_tagger(tmp_path_factory.mktemp("tagger"))


def report_counts(stdout):
    """(runs as the plan, runs as the MXNet graph) from run_model's last line."""
    match = re.search(r"report: (\d+) runs as the plan, (\d+) as the MXNet graph", stdout[-1])
    assert match, stdout
    return int(match.group(1)), int(match.group(2))


def test_control_flow_model_matches_python_on_every_branch_and_length(runner, tagger, tmp_path):
    block, prefix = tagger
    calls = tagger_calls(np.random.RandomState(1))
    expected = python_outputs(block, calls)
    # The calls cover both branches, loops that run no step and past max_iterations, and
    # lengths and batch sizes the block never saw before the export.
    assert {bool(out[2].sum() > 0) for out in expected} == {True, False}
    steps = {int(inputs[1][0]) for inputs in calls}
    assert 0 in steps and max(steps) > MAX_STEPS
    assert {inputs[0].shape[0] for inputs in calls} >= {1, 4, 7}
    got, stdout = run_model(runner, prefix, calls, str(tmp_path))
    assert stdout[0] == "inputs: data0 data1"
    assert_same(got, expected, "C runtime")
    assert report_counts(stdout) == (0, len(calls))


class GatedDense(gluon.HybridBlock):
    """Dense then a gate from its split halves: MXNet 1.9.1 crashes preparing a graph with a
    split (SliceChannel) unless its operator registry was listed first, as `import mxnet`
    does and the runtime does too."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(6, in_units=FEATURES)

    def hybrid_forward(self, F, x):
        value, gate = F.split(self.dense(x), num_outputs=2, axis=1)
        return value * F.sigmoid(gate)


def test_a_graph_with_a_split_runs(runner, tmp_path):
    block = initialized(GatedDense(), 10)
    calls = [[np.random.RandomState(batch).uniform(-1, 1, (batch, FEATURES)).astype("f4")]
             for batch in (1, 3)]
    python_outputs(block, calls[:1])
    block.export(str(tmp_path / "gated"))
    got, _ = run_model(runner, str(tmp_path / "gated"), calls, str(tmp_path))
    assert_same(got, python_outputs(block, calls), "a graph with a split, from C")


class Guarded(gluon.HybridBlock):
    """gluon_dyn's run-time assertion in the graph: it needs the operator library, and fails
    while the graph runs (an error MXNet reports when the output is read)."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(3, in_units=FEATURES)

    def hybrid_forward(self, F, x):
        _, (y,) = native.assert_true(F, F.min(x) > 0, self.dense(x), message="x must be positive")
        return F.relu(y) + 1


def test_a_failed_assertion_fails_the_run_and_the_model_stays_usable(runner, tmp_path):
    block = initialized(Guarded(), 11)
    positive = np.random.RandomState(12).uniform(0.1, 1, (2, FEATURES)).astype("f4")
    python_outputs(block, [[positive]])
    block.export(str(tmp_path / "guarded"))
    calls = [[positive], [-positive], [positive * 2], [-positive], [positive[:1]]]
    got, _ = run_model(runner, str(tmp_path / "guarded"), calls, str(tmp_path))
    for failure in (got[1], got[3]):
        assert failure.startswith("gd_model_run: the graph rejects input data of shape (2, 4): ")
        assert "gluon_dyn assumption failed: x must be positive" in failure
    good = [calls[0], calls[2], calls[4]]
    assert_same([got[0], got[2], got[4]], python_outputs(block, good), "after failed assertions")


def test_mlp_plan_runs_its_tvm_segment_and_any_batch(runner, tmp_path):
    block = initialized(Mlp(), 1)
    rng = np.random.RandomState(2)
    example = [rng.uniform(-1, 1, (2, FEATURES)).astype("f4")]
    compiled, prefix = export_plan(block, example, tmp_path, "mlp", str(tmp_path / "cache"),
                                   symbolic_dims={0: {0: "batch"}})
    assert [s["backend"] for s in compiled.report()["segments"]] == ["tvm"]
    calls = [[rng.uniform(-1, 1, (batch, FEATURES)).astype("f4")] for batch in (2, 7, 1)]
    got, stdout = run_model(runner, prefix, calls, str(tmp_path))
    assert_same(got, python_outputs(block, calls), "MLP plan from C")
    assert report_counts(stdout) == (3, 0)


def test_a_call_whose_shapes_differ_from_a_static_plan_runs_as_the_mxnet_graph(runner, tmp_path):
    block = initialized(Mlp(), 2)
    rng = np.random.RandomState(3)
    example = [rng.uniform(-1, 1, (2, FEATURES)).astype("f4")]
    _, prefix = export_plan(block, example, tmp_path, "static", str(tmp_path / "cache"))
    calls = [example, [rng.uniform(-1, 1, (5, FEATURES)).astype("f4")], example]
    got, stdout = run_model(runner, prefix, calls, str(tmp_path))
    assert_same(got, python_outputs(block, calls), "static plan from C")
    assert report_counts(stdout) == (2, 1)
    assert "compiled for float32 (2, 4), got float32 (5, 4)" in stdout[-1]


def test_plan_around_a_while_loop_and_a_cond(runner, tmp_path):
    """The `_while_loop` runs in MXNet, the `_cond` on TVM (relax.If), Dense layers on TVM
    after both."""
    block = initialized(Refiner(), 3)
    rng = np.random.RandomState(4)
    calls = refiner_calls(rng, batch=2)
    compiled, prefix = export_plan(block, calls[0], tmp_path, "refiner", str(tmp_path / "cache"))
    segments = compiled.report()["segments"]
    backend_of = {op: s["backend"] for s in segments for op in s["op_names"]
                  if op in ("_while_loop", "_cond")}
    assert backend_of == {"_while_loop": "mxnet", "_cond": "tvm"}, segments
    after = segments[[k for k, s in enumerate(segments) if "_while_loop" in s["op_names"]][0] + 1:]
    assert any(s["backend"] == "tvm" for s in after), segments
    expected = python_outputs(block, calls)
    assert {refiner_branch(block, *inputs) for inputs in calls} == {True, False}
    # Other trip counts and branches keep the compiled types: the plan serves them.
    got, stdout = run_model(runner, prefix, calls, str(tmp_path))
    assert_same(got, expected, "plan around a while_loop and a cond, from C")
    assert report_counts(stdout) == (len(calls), 0)
    # Another batch size changes the types the TVM steps were compiled for.
    other = refiner_calls(rng, batch=3)[:2]
    got, stdout = run_model(runner, prefix, other, str(tmp_path))
    assert_same(got, python_outputs(block, other), "plan with other types, from C")
    assert report_counts(stdout) == (0, 2)


def refiner_branch(block, x, steps):
    """Whether Refiner's cond takes its first branch on this call (computed imperatively)."""
    h = block.first(mx.nd.array(x))
    for _ in range(min(int(steps[0]), MAX_STEPS)):
        h = mx.nd.tanh(h) * 1.5
    return bool(h.sum().asscalar() > 0)


@pytest.mark.long
def test_no_leak_over_ten_thousand_runs(runner, tmp_path):
    block = initialized(Looper(), 5)
    rng = np.random.RandomState(5)
    cycle = [[rng.uniform(-1, 1, (batch, FEATURES)).astype("f4"), np.array([steps], "f4")]
             for batch, steps in [(1, 0), (3, 1), (2, 2), (4, 0)]]
    python_outputs(block, cycle[:1])
    prefix = str(tmp_path / "looper")
    block.export(prefix)
    calls_path = str(tmp_path / "cycle.bin")
    write_calls(calls_path, cycle)
    done = subprocess.run([runner, "--leak", prefix, calls_path, "50", "10000"],
                          capture_output=True, text=True, timeout=1200, env=clean_environment())
    assert done.returncode == 0, done.stderr[-3000:]
    before, after = map(int, re.search(r"rss_kb (\d+) (\d+)", done.stdout).groups())
    print("RSS after warm-up %d kB, after 10,000 more runs %d kB" % (before, after))
    assert after < before * 1.05, (before, after)


def run_threads(runner, prefix, calls, tmp_path, rounds=3):
    calls_path = str(tmp_path / "calls.bin")
    write_calls(calls_path, calls)
    done = subprocess.run([runner, "--threads", "2", prefix, calls_path, str(rounds)],
                          capture_output=True, text=True, timeout=600, env=clean_environment())
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_models_run_in_parallel_threads(runner, tagger, tmp_path):
    calls = tagger_calls(np.random.RandomState(6))
    assert "runs 60 mismatches 0 errors 0" in run_threads(runner, tagger[1], calls, tmp_path)


def test_plans_run_in_parallel_threads(runner, tmp_path):
    block = initialized(Refiner(), 13)
    calls = refiner_calls(np.random.RandomState(14), batch=2)
    _, prefix = export_plan(block, calls[0], tmp_path, "refiner", str(tmp_path / "cache"))
    stdout = run_threads(runner, prefix, calls, tmp_path, rounds=5)
    assert "runs 60 mismatches 0 errors 0" in stdout
    # The first model also ran the calls one by one, for the expected outputs.
    assert "report 0: 36 runs as the plan, 0 as the MXNet graph" in stdout
    assert "report 1: 30 runs as the plan, 0 as the MXNet graph" in stdout


def test_bad_inputs_fail_by_name_and_the_model_stays_usable(runner, tagger, tmp_path):
    block, prefix = tagger
    good = tagger_calls(np.random.RandomState(7))[:2]
    seq, steps = good[0]
    bad = {
        "one input": ([seq], "the model takes 2 inputs (data0, data1), got 1"),
        "three inputs": ([seq, steps, steps], "the model takes 2 inputs (data0, data1), got 3"),
        "no dimensions": ([(0, []), steps], "input data0: 0 dimensions; inputs have 1 to 32"),
        "33 dimensions": ([(33, [1] * 33), steps], "input data0: 33 dimensions"),
        "a zero dimension": ([(3, [2, 0, FEATURES]), steps],
                             "input data0: shape (2, 0, 4) has a dimension below 1"),
        "a negative dimension": ([seq, (1, [-1])],
                                 "input data1: shape (-1,) has a dimension below 1"),
        "too many elements": ([(3, [2 ** 16, 2 ** 16, 1]), steps], "more than 2147483647"),
        "a shape the graph rejects": ([seq[:, :, :3].copy(), steps],
                                      "the graph rejects input data0 of shape (3, 2, 3): "),
        "a rank the graph rejects": ([seq[0].copy(), steps], "the graph rejects input"),
    }
    calls, checks = [], []
    for name, (inputs, message) in bad.items():
        calls += [inputs, good[len(calls) // 2 % 2]]
        checks.append((name, message))
    got, _ = run_model(runner, prefix, calls, str(tmp_path))
    expected_good = python_outputs(block, good)
    for k, (name, message) in enumerate(checks):
        failure, after = got[2 * k], got[2 * k + 1]
        assert isinstance(failure, str) and failure.startswith("gd_model_run: "), (name, failure)
        assert message in failure, (name, failure)
        assert_same([after], [expected_good[k % 2]], "the call after " + name)


def corrupt(prefix, directory, name, change):
    """A copy of the model's files with `change(files)` applied; returns its prefix."""
    new_prefix, files = copy_model(prefix, directory, name)
    change(files)
    return new_prefix


def truncate(path, keep=0.5):
    data = open(path, "rb").read()
    open(path, "wb").write(data[:int(len(data) * keep)])


def rewrite_json(path, edit):
    graph = json.load(open(path))
    edit(graph)
    json.dump(graph, open(path, "w"))


def recorded(change):
    """`change` made as an exporter would: the files' checksums recorded again (the files
    are whole, but not a model the runtime can run)."""
    def changed(files):
        change(files)
        checksums.write(files["-symbol.json"][:-len("-symbol.json")], plan="-plan.json" in files)
    return changed


def rename_op(graph):
    for node in graph["nodes"]:
        for sub in node.get("subgraphs", ()):
            rename_op(sub)
        if node["op"] == "FullyConnected":
            node["op"] = "FullyConnectedTypo"


# What the runtime says of a file whose size or CRC-32 is not the one export recorded.
DAMAGED = "the file is truncated or damaged, or changed after export"
BAD_MODEL_FILES = {
    "missing symbol": (lambda f: os.remove(f["-symbol.json"]), "-symbol.json: cannot be opened"),
    "missing params": (lambda f: os.remove(f["-0000.params"]), "-0000.params: cannot be opened"),
    "missing checksums": (lambda f: os.remove(f["-checksums.json"]),
                          "-checksums.json: cannot be opened"),
    "truncated symbol": (lambda f: truncate(f["-symbol.json"]), ("-symbol.json: ", DAMAGED)),
    "truncated params": (lambda f: truncate(f["-0000.params"]), ("-0000.params: ", DAMAGED)),
    "damaged params": (lambda f: open(f["-0000.params"], "r+b").write(b"\xff" * 8),
                       ("-0000.params: ", DAMAGED)),
    # Whole files, recorded as such, that are not a model: MXNet's own message, the file named.
    "symbol not JSON": (recorded(lambda f: open(f["-symbol.json"], "w").write("not a graph")),
                        "-symbol.json: MXNetError: Check failed: ch == '{'"),
    "unknown operator": (recorded(lambda f: rewrite_json(f["-symbol.json"], rename_op)),
                         "Operator FullyConnectedTypo is not registered"),
    "corrupt params header": (recorded(lambda f: open(f["-0000.params"], "r+b").write(
        b"\xff" * 8)), "-0000.params: MXNetError: Check failed: header"),
}


@pytest.mark.parametrize("case", sorted(BAD_MODEL_FILES))
def test_bad_model_files_fail_to_load_naming_the_file(runner, tagger, tmp_path, case):
    assert_load_fails(runner, tagger[1], tmp_path, *BAD_MODEL_FILES[case])


def assert_load_fails(runner, prefix, tmp_path, change, message):
    """The model at `prefix`, its files changed by `change`, fails to load from C
    with an error naming the files and saying `message` (each part of it, if a tuple)."""
    prefix = corrupt(prefix, tmp_path, "bad", change)
    done = subprocess.run([runner, prefix, "/dev/null", "/dev/null"], capture_output=True,
                          text=True, timeout=120, env=clean_environment())
    assert done.returncode == 2, (done.stdout, done.stderr[-2000:])
    assert done.stdout.startswith("load failed: gd_model_load: " + prefix), done.stdout
    for part in message if isinstance(message, tuple) else (message,):
        assert part in done.stdout, done.stdout


def test_parameters_that_do_not_fit_the_graph_fail_to_load(runner, tagger, tmp_path):
    block, prefix = tagger
    weight = block.refine.weight.name  # (HIDDEN, HIDDEN)

    def edit(params_file, change):
        params = mx.nd.load(params_file)
        change(params)
        mx.nd.save(params_file, params)

    cases = {
        "dropped": (lambda p: p.pop("arg:" + weight),
                    "has no array for the parameter %s of" % weight),
        "reshaped": (lambda p: p.update({"arg:" + weight: mx.nd.ones((5, 4))}),
                     "the parameter %s has shape (5, 4) where" % weight),
    }
    for name, (change, message) in cases.items():
        new = corrupt(prefix, tmp_path, name,
                      recorded(lambda f, change=change: edit(f["-0000.params"], change)))
        done = subprocess.run([runner, new, "/dev/null", "/dev/null"], capture_output=True,
                              text=True, timeout=120, env=clean_environment())
        assert done.returncode == 2 and message in done.stdout, (name, done.stdout)
        assert new + "-0000.params" in done.stdout and new + "-symbol.json" in done.stdout


def bump_version(files, version):
    rewrite_json(files["-plan.json"], lambda plan: plan.update(version=version))


BAD_PLAN_FILES = {
    "newer version": (recorded(lambda f: bump_version(f, 3)),
                      "-plan.json: plan version 3 is newer than the version this runtime reads (2)"),
    "no version": (recorded(lambda f: rewrite_json(f["-plan.json"],
                                                   lambda plan: plan.pop("version"))),
                   "-plan.json: a plan without a version number"),
    "not a plan": (recorded(lambda f: rewrite_json(f["-plan.json"],
                                                   lambda plan: plan.update(kind="x"))),
                   "-plan.json: not a tvm_bridge plan"),
    "truncated plan": (lambda f: truncate(f["-plan.json"]), ("-plan.json: ", DAMAGED)),
    "missing segment library": (lambda f: os.remove(f["-segment0-tvm.so"]),
                                "-segment0-tvm.so: cannot be opened"),
    "truncated segment library": (lambda f: truncate(f["-segment0-tvm.so"], 0.3),
                                  ("-segment0-tvm.so: ", DAMAGED)),
    "damaged segment library": (lambda f: open(f["-segment0-tvm.so"], "r+b").write(b"\0" * 64),
                                ("-segment0-tvm.so: ", DAMAGED)),
    # A library whose record was made again (not by export): the plan's own checksum refuses it.
    "replaced segment library": (recorded(lambda f: truncate(f["-segment0-tvm.so"], 0.3)),
                                 "-segment0-tvm.so: not the library the plan was exported with"),
    "step reading an unknown value": (
        recorded(lambda f: rewrite_json(
            f["-plan.json"], lambda plan: plan["steps"][0]["inputs"].__setitem__(0, "nowhere"))),
        "-plan.json: steps[0].inputs[0]: nowhere is neither a data input"),
}


@pytest.fixture(scope="module")
def mlp_plan(tmp_path_factory):
    directory = tmp_path_factory.mktemp("plan")
    block = initialized(Mlp(), 4)
    example = [np.random.RandomState(8).uniform(-1, 1, (2, FEATURES)).astype("f4")]
    return export_plan(block, example, directory, "mlp", str(directory / "cache"))[1]


@pytest.mark.parametrize("case", sorted(BAD_PLAN_FILES))
def test_bad_plan_files_fail_to_load_naming_the_file(runner, mlp_plan, tmp_path, case):
    assert_load_fails(runner, mlp_plan, tmp_path, *BAD_PLAN_FILES[case])


@pytest.fixture(scope="module")
def blas_plan(tmp_path_factory):
    """An MLP plan whose products call the mxnet wheel's OpenBLAS, any batch:
    (block, prefix)."""
    directory = tmp_path_factory.mktemp("blas")
    block = initialized(Mlp(), 6)
    example = [np.random.RandomState(9).uniform(-1, 1, (2, FEATURES)).astype("f4")]
    compiled, prefix = export_plan(block, example, directory, "mlp", str(directory / "cache"),
                                   symbolic_dims={0: {0: "batch"}}, gemms="blas")
    assert compiled.report()["segments"][0]["blas_gemms"] == {"(batch)x4x8 B^T": 1,
                                                              "(batch)x8x3 B^T": 1}
    return block, prefix


def test_a_plan_whose_products_call_blas_runs_from_c_and_matches_python(runner, blas_plan,
                                                                        tmp_path):
    block, prefix = blas_plan
    signature = json.load(open(prefix + "-segment0-tvm.json"))
    assert signature["format"] == 3
    assert signature["external"] == [{"library": "libopenblas.so.0", "symbol": "cblas_sgemm"}]
    rng = np.random.RandomState(10)
    calls = [[rng.uniform(-1, 1, (batch, FEATURES)).astype("f4")] for batch in (2, 33, 1)]
    got, stdout = run_model(runner, prefix, calls, str(tmp_path))
    assert_same(got, python_outputs(block, calls), "BLAS plan from C")
    assert report_counts(stdout) == (3, 0)


def set_external(files, entries):
    rewrite_json(files["-segment0-tvm.json"], lambda signature: signature.update(external=entries))


BAD_EXTERNAL_FUNCTIONS = {
    "a path": (lambda f: set_external(f, [{"library": "/lib/libopenblas.so.0",
                                           "symbol": "cblas_sgemm"}]),
               "-segment0-tvm.json: external[0]: external library \"/lib/libopenblas.so.0\": "
               "a file name of the mxnet package is expected, not a path"),
    "a missing library": (lambda f: set_external(f, [{"library": "libnothing.so",
                                                      "symbol": "cblas_sgemm"}]),
                          "-segment0-tvm.json: external[0]: external library libnothing.so: "
                          "cannot load "),
    "a missing symbol": (lambda f: set_external(f, [{"library": "libopenblas.so.0",
                                                     "symbol": "cblas_nothing"}]),
                         "external library libopenblas.so.0 has no function cblas_nothing"),
    "no symbol": (lambda f: set_external(f, [{"library": "libopenblas.so.0"}]),
                  "-segment0-tvm.json: external[0]: no field \"symbol\""),
    "a newer format": (lambda f: rewrite_json(f["-segment0-tvm.json"],
                                              lambda signature: signature.update(format=4)),
                       "-segment0-tvm.json: signature format 4, this runtime reads formats 1 "
                       "to 3"),
}


@pytest.mark.parametrize("case", sorted(BAD_EXTERNAL_FUNCTIONS))
def test_bad_external_functions_fail_to_load_naming_them(runner, blas_plan, tmp_path, case):
    change, message = BAD_EXTERNAL_FUNCTIONS[case]   # whole signatures, recorded as such
    assert_load_fails(runner, blas_plan[1], tmp_path, recorded(change), message)


def test_api_misuse_fails_with_messages(tmp_path):
    dense = gluon.nn.Dense(2, in_units=3)
    dense.initialize()
    dense.hybridize()
    dense(mx.nd.ones((2, 3)))
    dense.export(str(tmp_path / "dense"))
    program = compile_c(os.path.join(TESTS_NATIVE, "api_misuse.c"), str(tmp_path / "api_misuse"))
    done = subprocess.run([program, str(tmp_path / "dense"), str(tmp_path / "missing")],
                          capture_output=True, text=True, timeout=120, env=clean_environment())
    assert done.returncode == 0, done.stderr[-2000:]
    lines = dict(line.split(": ", 1) for line in done.stdout.splitlines() if ": " in line)
    expected = {
        "load NULL": "NULL | gd_model_load: the prefix is NULL",
        "load missing": "NULL | gd_model_load: %s-checksums.json: cannot be opened" % (
            tmp_path / "missing"),
        "load good after a failed load": "set | ",
        "num_inputs NULL": "-1 | gd_model_num_inputs: the model is NULL",
        "input_name 1": "NULL | gd_model_input_name: input 1 does not exist (the model has 1)",
        "output_ndim before a run": "-1 | gd_model_output_ndim: no outputs",
        "run NULL model": "-1 | gd_model_run: the model is NULL",
        "run negative count": "-1 | gd_model_run: num_inputs is negative",
        "run NULL inputs": "-1 | gd_model_run: inputs, ndims and shapes must not be NULL",
        "run NULL data": "-1 | gd_model_run: input data: its data is NULL",
        "run NULL shape": "-1 | gd_model_run: input data: its shape is NULL",
        "run good": "0 | ",
        "output_ndim 0": "2 | ",
        "output_ndim out of range": "-1 | gd_model_output_ndim: output 1 does not exist",
        "output_data -1": "NULL | gd_model_output_data: output -1 does not exist",
        "run rejected shape": "-1 | gd_model_run: the graph rejects input data of shape (2, 4)",
        "output_ndim after a failed run": "-1 | gd_model_output_ndim: no outputs",
        "run good again": "0 | ",
        "output_ndim after the good run": "2 | ",
        "report NULL": "NULL | gd_model_report: the model is NULL",
    }
    for case, text in expected.items():
        assert lines.get(case, "").startswith(text), (case, lines.get(case))
    assert done.stdout.rstrip().endswith("done")


def test_the_header_is_c99_and_cxx(tmp_path):
    source = tmp_path / "both.c"
    source.write_text('#include "gluon_dyn_runtime.h"\nint main(void) { gd_model_free(0); '
                      'return gd_model_num_inputs(0) == -1 ? 0 : 1; }\n')
    for compiler, standard in (("cc", "-std=c99"), ("c++", "-std=c++11")):
        program = str(tmp_path / ("both_" + compiler))
        command = [compiler, standard, "-pedantic", "-Wall", "-Werror", "-x",
                   "c" if compiler == "cc" else "c++", str(source), "-I" + os.path.join(
                       REPO, "src", "runtime"), "-o", program, "-L" + os.path.join(REPO, "build"),
                   "-lgluon_dyn_runtime", "-Wl,-rpath," + os.path.join(REPO, "build")]
        subprocess.run(command, check=True)
        assert subprocess.run([program], env=clean_environment()).returncode == 0
