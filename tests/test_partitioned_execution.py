"""Graphs cut around their data-dependent shapes (cut_graph.py): the static parts
before and after a boolean_mask run as CachedOps with planned memory, the mask alone
on the real shapes. Outputs, input and parameter gradients equal the imperative
block's call after call, over batch sizes that change; each part is built once for
every size (counted by the report); a recorded mask trains without MXNet's crash; a
branch never taken that holds a whole segment costs nothing; under backend="tvm"
the static parts run on TVM, compiled once with the kept rows as a symbolic dim.
Subprocess tests run under a time limit (a hang, or a crash, fails them)."""
import json
import os
import subprocess
import sys

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_dyn
import tvm_helpers  # noqa: F401  (TVM's thread settings)
from conftest import copy_params

BATCHES = (4, 7, 1, 16, 4, 9)
MORE_BATCHES = (3, 12, 5, 16, 2, 9)


class MaskedHead(gluon.Block):
    """Scores rows, keeps those that pass (the mask detached: MXNet 1.9.1 crashes in
    an imperative backward through a recorded mask), runs a head on them, branches."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.body = gluon.nn.Dense(8, in_units=4, activation="relu")
            self.score = gluon.nn.Dense(1, in_units=8)
            self.head = gluon.nn.Dense(3, in_units=8, activation="tanh")
            self.out = gluon.nn.Dense(2, in_units=3)

    def forward(self, x):
        features = self.body(x)
        scores = self.score(features).reshape((-1,))
        kept = mx.nd.contrib.boolean_mask(features, (scores > 0).detach())
        out = self.out(self.head(kept))
        if out.sum() > 0:
            out = out * 2
        return out


class MaskedHybrid(gluon.HybridBlock):
    """The same in a HybridBlock, the mask taken from the input's rows."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.body = gluon.nn.Dense(8, in_units=4, activation="relu")
            self.head = gluon.nn.Dense(3, in_units=8)

    def hybrid_forward(self, F, x):
        kept = F.contrib.boolean_mask(self.body(x), F.sum(x, axis=1) > 0)
        return F.tanh(self.head(kept)) * 3


class RecordedMask(MaskedHead):
    """The mask recorded (not detached): an imperative backward through it crashes
    MXNet 1.9.1, so this block only ever runs as graphs, in a process of its own."""

    def forward(self, x):
        features = self.body(x)
        kept = mx.nd.contrib.boolean_mask(features, self.score(features).reshape((-1,)) > 0)
        return self.out(self.head(kept))


class DetachedMask(MaskedHead):
    """RecordedMask's reference: the same values and gradients (none flows to a mask)."""

    def forward(self, x):
        features = self.body(x)
        kept = mx.nd.contrib.boolean_mask(features,
                                          (self.score(features).reshape((-1,)) > 0).detach())
        return self.out(self.head(kept))


class UntakenSegment(MaskedHead):
    """A branch never taken holds a whole masked segment; the taken one is cheap."""

    def forward(self, x):
        features = self.body(x)
        kept = mx.nd.contrib.boolean_mask(features, (self.score(features).reshape((-1,)) >
                                                     0).detach())
        if mx.nd.sum(kept) > 1e6:   # never: the features are small
            rows = mx.nd.contrib.boolean_mask(kept, (mx.nd.sum(kept, axis=1) > 1).detach())
            out = self.out(self.head(rows)).sum(axis=0, keepdims=True)
        else:
            out = mx.nd.sum(kept, axis=0, keepdims=True)[:, :2]
        return out


def batch(rng, size, block=None):
    """Rows with both signs of sum, the first one's positive, of which `block`'s score
    (if it has one) keeps at least one: a mask that keeps none fails imperatively."""
    while True:
        x = rng.randn(size, 4)
        x[0] = np.abs(x[0]) + 0.1
        x = mx.nd.array(x)
        if not hasattr(block, "score") or block.score(block.body(x)).max().asscalar() > 0:
            return x


def twins(cls, **options):
    imperative, dynamic = cls(), cls()
    mx.random.seed(3)
    for block in (imperative, dynamic):
        block.initialize(mx.init.Uniform(0.5))
    copy_params(imperative, dynamic)
    # Speculation and the speed check off: every call is a graph's (the branch a cond).
    dynamic.hybridize(dynamic=True, speculate=False, check_speed=False, **options)
    return imperative, dynamic


def run(block, x, training):
    x = x.copy()
    x.attach_grad()
    block.collect_params().zero_grad()
    with autograd.record(train_mode=training):
        out = block(x)
    out.backward()
    grads = [p.grad().asnumpy().copy() for _, p in sorted(block.collect_params().items())]
    return [out.asnumpy(), x.grad.asnumpy()] + grads


def assert_same(got, expected):
    assert len(got) == len(expected)
    for have, want in zip(got, expected):
        np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-5)


def served_by_graphs(report, calls):
    assert report["fallback"] is None and not report["internal_errors"]
    assert report["calls"]["by_kind"]["graph"] == calls, report["calls"]


def parts_of(report, mode):
    """The parts of the latest graph cached that ran in `mode` ("recording", "inference")."""
    return [graph[mode] for graph in report["partitioned"] if graph[mode]][-1]


@pytest.mark.parametrize("cls", [MaskedHead, MaskedHybrid])
@pytest.mark.parametrize("training", [True, False])
def test_a_graph_cut_at_its_mask_matches_imperative_forward_and_backward(cls, training):
    imperative, dynamic = twins(cls)
    rng = np.random.RandomState(0)
    for size in BATCHES + MORE_BATCHES:
        x = batch(rng, size, imperative)
        assert_same(run(dynamic, x, training), run(imperative, x, training))
    report = gluon_dyn.hybridize.report(dynamic)
    served_by_graphs(report, len(BATCHES + MORE_BATCHES))
    parts = parts_of(report, "recording")
    kinds = [part["kind"] for part in parts]
    assert kinds[:3] == ["static, memory planned", "data-dependent", "static, memory planned"]
    assert parts[1]["ops"] == {"_contrib_boolean_mask": 1}
    assert "FullyConnected" in parts[0]["ops"] and "FullyConnected" in parts[2]["ops"]
    if cls is MaskedHead:   # its `if` on the head's output: the branch taken, run by Python
        assert len(kinds) == 4 and kinds[3].startswith("cond at ") and \
            kinds[3].endswith(", run by Python")
        assert parts[3]["then"]["calls"] + parts[3]["else"]["calls"] == parts[3]["calls"]


def builds(part):
    """CachedOps built for a part (for a cond, for its three graphs)."""
    if "then" in part:
        return sum(part[graph]["cachedops_built"] for graph in ("cond", "then", "else"))
    return part["cachedops_built"]


def infer_every_batch(imperative, dynamic, rng, section):
    """Inference on BATCHES, then MORE_BATCHES, each call matching imperative:
    (the report's `section` after BATCHES, the whole report at the end)."""
    built = None
    with autograd.predict_mode():
        for sizes in (BATCHES, MORE_BATCHES):
            if sizes is MORE_BATCHES:
                built = gluon_dyn.hybridize.report(dynamic)[section]
            for size in sizes:
                x = batch(rng, size, imperative)
                np.testing.assert_allclose(dynamic(x).asnumpy(), imperative(x).asnumpy(),
                                           rtol=1e-5, atol=1e-5)
    return built, gluon_dyn.hybridize.report(dynamic)


def test_each_static_part_is_built_once_for_every_batch_size():
    imperative, dynamic = twins(MaskedHead)
    built, report = infer_every_batch(imperative, dynamic, np.random.RandomState(1), "partitioned")
    served_by_graphs(report, len(BATCHES + MORE_BATCHES))
    # One graph for the first call's exact shapes, one for every batch size after it.
    assert report["traces"] == 2 and len(report["partitioned"]) == 2
    for graph in report["partitioned"]:
        # A static part or a branch: one CachedOp; a cond: its predicate's graph, and
        # one for each branch that ran.
        assert [builds(part) for part in graph["inference"]][:3] == [1, 1, 1]
        assert 2 <= builds(graph["inference"][3]) <= 3
        assert graph["recording"] is None
    # New sizes build nothing: the last graph's parts served them all.
    assert [[builds(part) for part in graph["inference"]] for graph in built] == \
        [[builds(part) for part in graph["inference"]] for graph in report["partitioned"]]
    assert [part["calls"] for part in parts_of(report, "inference")] == \
        [len(BATCHES + MORE_BATCHES) - 1] * 4


def run_script(script, timeout=300):
    tests = os.path.dirname(os.path.abspath(__file__))
    done = subprocess.run([sys.executable, "-c", script.format(tests=tests)],
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    return done.stdout.splitlines()


RECORDED_MASK = """
import sys
sys.path.insert(0, {tests!r})
import numpy as np, gluon_dyn
import test_partitioned_execution as t
reference, dynamic = t.twins(t.DetachedMask)[0], t.twins(t.RecordedMask)[1]
t.copy_params(reference, dynamic)
rng = np.random.RandomState(2)
for size in t.BATCHES + t.MORE_BATCHES:
    x = t.batch(rng, size, reference)
    t.assert_same(t.run(dynamic, x, True), t.run(reference, x, True))
report = gluon_dyn.hybridize.report(dynamic)
t.served_by_graphs(report, len(t.BATCHES + t.MORE_BATCHES))
print([part["kind"] for part in t.parts_of(report, "recording")])
"""


def test_a_recorded_mask_trains_across_the_cut_without_crashing():
    # MXNet 1.9.1 dies (SIGSEGV) in a backward through a boolean_mask whose mask is
    # recorded, imperatively and in a CachedOp: the cut gives the mask detached.
    assert run_script(RECORDED_MASK)[-1] == str(
        ["static, memory planned", "data-dependent", "static, memory planned"])


UNTAKEN = """
import sys
sys.path.insert(0, {tests!r})
import numpy as np, mxnet as mx, gluon_dyn
from mxnet import autograd
import test_partitioned_execution as t
imperative, dynamic = t.twins(t.UntakenSegment)
rng = np.random.RandomState(4)
for size in t.BATCHES:
    x = t.batch(rng, size, imperative)
    t.assert_same(t.run(dynamic, x, True), t.run(imperative, x, True))
    with autograd.predict_mode():
        t.assert_same([dynamic(x).asnumpy()], [imperative(x).asnumpy()])
report = gluon_dyn.hybridize.report(dynamic)
t.served_by_graphs(report, 2 * len(t.BATCHES))
print(report["statements"])
for mode in ("recording", "inference"):
    cond = t.parts_of(report, mode)[-1]
    print(mode, cond["kind"].split(" at ")[0], cond["calls"] > 0, cond["then"]["calls"],
          cond["then"]["cachedops_built"], cond["else"]["calls"] == cond["calls"],
          cond["then"]["kind"])
"""


def test_a_branch_never_taken_that_holds_a_whole_segment_costs_nothing():
    lines = run_script(UNTAKEN, timeout=240)
    assert "if: cond (graph)" in lines[-3]
    # The cond runs by Python: the branch holding the masked segment (its shapes to be
    # inferred node by node) never ran, and was never even built.
    kind = "static, shapes inferred per node (a data-dependent shape in control flow)"
    assert lines[-2:] == ["%s cond True 0 0 True %s" % (mode, kind)
                          for mode in ("recording", "inference")]


def test_on_tvm_the_static_parts_compile_once_with_the_kept_rows_symbolic(tmp_path):
    imperative, dynamic = twins(MaskedHead, backend="tvm", backend_options={
        "cache_dir": str(tmp_path), "choose_by_measurement": False})
    built, report = infer_every_batch(imperative, dynamic, np.random.RandomState(5), "tvm")
    served_by_graphs(report, len(BATCHES + MORE_BATCHES))
    tvm = report["tvm"]
    assert tvm["failures"] == []
    # A plan for the first call's exact shapes, one with symbolic dims for the rest:
    # new batch sizes and kept-row counts compile nothing.
    assert tvm["plans_built"] == 2 and built["functions_built"] == tvm["functions_built"]
    plan = tvm["plans"][-1]
    backends = [(segment["backend"], segment["op_names"]) for segment in plan["segments"]]
    assert [backend for backend, _ in backends] == ["tvm", "host", "tvm"], backends
    assert backends[1][1] == {"_contrib_boolean_mask": 1}
    assert tvm["functions_built"] == 4
    assert plan["calls"]["plan"] == len(BATCHES + MORE_BATCHES) - 2   # TVM ran them


EMPTY_ON_TVM = """
import sys, tempfile, traceback
sys.path.insert(0, {tests!r})
import numpy as np, mxnet as mx, gluon_dyn
from mxnet import autograd
import test_partitioned_execution as t
imperative, dynamic = t.twins(t.MaskedHybrid, backend="tvm", backend_options={{
    "cache_dir": tempfile.mkdtemp(), "choose_by_measurement": False}})
rng = np.random.RandomState(6)
with autograd.predict_mode():
    for size in (4, 7, 5):
        x = t.batch(rng, size)
        t.assert_same([dynamic(x).asnumpy()], [imperative(x).asnumpy()])
    empty = -mx.nd.abs(t.batch(rng, 5))      # every row's sum negative: nothing kept
    for name, block in (("imperative", imperative), ("dynamic", dynamic)):
        try:
            block(empty).wait_to_read()
            print(name, "ran")
        except mx.base.MXNetError as error:
            frames = traceback.extract_tb(error.__traceback__)
            at_forward = any(f.filename == t.__file__ and f.name == "hybrid_forward"
                             for f in frames)
            print(name, "raised", "from hybrid_forward" if at_forward else "elsewhere")
report = gluon_dyn.hybridize.report(dynamic)
print("plan calls", report["tvm"]["plans"][-1]["calls"]["plan"] > 0,
      "raised", report["calls"]["by_kind"]["raised"])
"""


def test_on_tvm_a_mask_that_keeps_no_rows_fails_as_imperatively_from_the_users_line():
    assert run_script(EMPTY_ON_TVM)[-3:] == [
        "imperative raised from hybrid_forward", "dynamic raised from hybrid_forward",
        "plan calls True raised 1"]


def test_a_cut_graph_matches_one_cachedop_of_it_whatever_its_parts_read():
    """Parts that read nothing (constants), a cond of which only some outputs are read
    after it (in another order), masks: the cut graph's outputs are the graph's."""
    from gluon_dyn.hybridize.partition.cut_graph import CutGraph
    x = mx.sym.var("x")
    kept = mx.sym.contrib.boolean_mask(x, mx.sym.sum(x, axis=1) > 0)
    first, unused, last = mx.sym.contrib.cond(
        mx.sym.sum(kept) > 0, lambda: [kept * 2, kept + 1, kept - 3],
        lambda: [kept - 1, kept * 0.5, kept + 2])
    constant = mx.sym.contrib.boolean_mask(mx.sym.ones((4, 3)), mx.sym.ones((4,)))
    symbol = mx.sym.Group([last * first, constant + 1, first])
    rng = np.random.RandomState(7)
    for recording in (False, True):
        cut = CutGraph(symbol, recording=recording)
        for _ in range(4):
            x_value = batch(rng, 4) * rng.choice([-1, 1]) - 0.1
            x_value[0] = mx.nd.abs(x_value[0]) + 0.1
            with autograd.record() if recording else autograd.pause():
                got = cut(x_value)
            want = mx.nd.CachedOp(symbol)(x_value)
            assert_same([g.asnumpy() for g in got], [w.asnumpy() for w in want])
        assert any("cond at " in part["kind"] for part in cut.report())


def test_an_exported_masked_plan_runs_from_c(tmp_path):
    """The plan of the general graph (TVM, the mask as an MXNet step, TVM) from the C
    runtime: calls of the latest call's types on the plan, others on the MXNet graph."""
    from deploy_models import python_outputs
    from native_runtime import RUN_MODEL_SOURCE, compile_c, run_model
    from test_c_runtime import report_counts
    imperative, dynamic = twins(MaskedHybrid, backend="tvm", backend_options={
        "cache_dir": str(tmp_path / "cache"), "choose_by_measurement": False})
    rng = np.random.RandomState(8)
    python_outputs(dynamic, [[batch(rng, size).asnumpy()] for size in (4, 7, 5)])
    prefix = str(tmp_path / "masked")
    dynamic.export(prefix)
    with open(prefix + "-plan.json") as f:
        steps = json.load(f)["steps"]
    assert [step["backend"] for step in steps] == ["tvm", "mxnet", "tvm"]
    same_types = [[batch(rng, 5).asnumpy()] for _ in range(3)]
    other_sizes = [[batch(rng, size).asnumpy()] for size in (2, 9)]
    runner = compile_c(RUN_MODEL_SOURCE, str(tmp_path / "run_model"))
    got, stdout = run_model(runner, prefix, same_types + other_sizes, str(tmp_path))
    for have, want in zip(got, python_outputs(imperative, same_types + other_sizes)):
        assert_same(have, want)
    assert report_counts(stdout) == (len(same_types), len(other_sizes))
