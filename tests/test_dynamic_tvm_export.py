"""export of a plain Block hybridized with dynamic=True, backend="tvm": MXNet's files and
the plan of its general graph, run from C without Python. The plan's TVM steps serve calls
with the types of the latest call before export; other types run the exported graph (the C
runtime's report proves which path served each call); outputs equal the imperative
block's on both paths, on both branches and on trip counts never seen before export."""
import json

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon

import gluon_dyn
from deploy_models import FEATURES, HIDDEN, assert_same, python_outputs
from native_runtime import RUN_MODEL_SOURCE, compile_c, run_model
from test_c_runtime import report_counts


class Refining(gluon.Block):
    """Python control flow on tensors: a `while` whose trip count is the data, then an `if`."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.first = gluon.nn.Dense(HIDDEN, in_units=FEATURES)
            self.refine = gluon.nn.Dense(HIDDEN, in_units=HIDDEN)
            self.pos = gluon.nn.Dense(3, in_units=HIDDEN)
            self.neg = gluon.nn.Dense(3, in_units=HIDDEN, activation="relu")

    def forward(self, x, steps):
        h = self.first(x)
        i = mx.nd.zeros((1,))
        while i.sum() < steps.sum():
            h = mx.nd.tanh(self.refine(h)) + h
            i = i + 1
        if h.sum() > 0:
            return self.pos(h)
        return self.neg(h) * 2


def calls(rng, batch):
    return [[(rng.uniform(-1, 1, (batch, FEATURES)) + scale).astype("f4"),
             np.array([steps], "f4")]
            for steps, scale in [(2, 2.0), (0, -2.0), (5, 2.0), (1, -2.0), (7, 2.0), (3, -2.0)]]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    directory = tmp_path_factory.mktemp("dynamic_tvm")
    mx.random.seed(3)
    twin = Refining()
    twin.initialize(mx.init.Uniform(0.7))
    twin.save_parameters(str(directory / "weights.params"))
    block = Refining()
    block.load_parameters(str(directory / "weights.params"))
    # Every segment TVM compiles stays on TVM: no timing decides what the test runs.
    block.hybridize(dynamic=True, backend="tvm", profile_calls=1,
                    backend_options={"choose_by_measurement": False,
                                     "cache_dir": str(directory / "cache")})
    rng = np.random.RandomState(4)
    seen = calls(rng, batch=2)[:3]
    python_outputs(block, seen)
    prefix = str(directory / "refining")
    assert block.export(prefix) == ["data0", "data1"]
    return twin, prefix, rng


def test_the_plan_of_the_general_graph_is_written(exported):
    _, prefix, _ = exported
    plan = json.load(open(prefix + "-plan.json"))
    assert plan["data_inputs"] == ["data0", "data1"] and plan["graph"] == "refining-symbol.json"
    backends = [step["backend"] for step in plan["steps"]]
    assert "tvm" in backends and "mxnet" in backends
    kept = {node["op"] for step in plan["steps"] if step["backend"] == "mxnet"
            for node in step["symbol"]["nodes"]}
    assert "_while_loop" in kept


def test_the_plan_runs_from_c_on_tvm_and_other_types_on_the_graph(exported, tmp_path):
    twin, prefix, rng = exported
    runner = compile_c(RUN_MODEL_SOURCE, str(tmp_path / "run_model"))
    same_types, other_batch = calls(rng, batch=2), calls(rng, batch=5)[:3]
    got, stdout = run_model(runner, prefix, same_types + other_batch, str(tmp_path))
    assert_same(got, python_outputs(twin, same_types + other_batch), "dynamic plan from C")
    assert report_counts(stdout) == (len(same_types), len(other_batch))


def test_export_without_tvm_writes_no_plan(exported, tmp_path):
    twin, _, rng = exported
    block = Refining()
    block.initialize()
    block.hybridize(dynamic=True)
    python_outputs(block, calls(rng, batch=2)[:2])
    block.export(str(tmp_path / "plain"))
    assert not (tmp_path / "plain-plan.json").exists()
    assert (tmp_path / "plain-symbol.json").exists()
    # export traces the general graph without counting a call
    assert gluon_dyn.hybridize.report(block)["calls"]["total"] == 2
