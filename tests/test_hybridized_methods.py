"""Methods other than forward on graphs: `hybridize(dynamic=True, methods=(...))`.

A model's training objective or decoding loop written as a method of its own runs
through a runner of its own: outputs, gradients and the Python state it changes
equal the method as written (1e-5), report()["methods"] proves graphs served the
calls, and the method's cache keys its graphs on recording and training mode and
on its arguments as the forward's does."""
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon, nd

import gluon_dyn
from dynamic_twins import assert_same, gradients, python_state, twins


class Tagger(gluon.Block):
    """A forward, an objective calling it with a tensor branch, keywords and a
    training-only term, a decoding method keeping a Python counter, and a method
    with a host read."""

    tags = ("B", "I", "O")

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(3, in_units=4)
        self.decoded = 0

    def forward(self, x):
        return self.dense(x)

    def loss(self, x, y, scale=2.0, *, squared=False):
        h = self(x)
        if h.sum() > 0:
            h = h * scale
        d = h - y
        if autograd.is_training():
            d = d + 0.1 * nd.abs(h).mean()
        return (d * d).sum() if squared else nd.abs(d).sum()

    def decode(self, x, steps):
        outputs, h = [], x
        for _ in range(steps):
            h = nd.tanh(self.dense(h))
            outputs.append(h.argmax(axis=1))
            h = nd.concat(h, h[:, :1], dim=1)
        self.decoded += 1
        return nd.stack(*outputs, axis=1)

    def monitored(self, x):
        h = self(x)
        print("mean", round(float(h.mean().asnumpy()[0]), 3))
        return h * 2


def make_tagger():
    return Tagger()


def run(block, method, args, kwargs=None, record=True, train_mode=True):
    """The method's result, the gradients it left and the Python state of the block."""
    args = [arg.copy() if isinstance(arg, mx.nd.NDArray) else arg for arg in args]
    block.collect_params().zero_grad()
    if record:
        with autograd.record(train_mode=train_mode):
            out = getattr(block, method)(*args, **(kwargs or {}))
        out.backward()
        return out, gradients(block), python_state(block)
    with autograd.pause():
        return getattr(block, method)(*args, **(kwargs or {})), python_state(block)


def test_an_objective_method_runs_on_graphs_with_its_gradients():
    imperative, dynamic = twins(make_tagger, methods=("loss",))
    rng = np.random.RandomState(0)
    for call in range(8):
        x, y = nd.array(rng.randn(2, 4)), nd.array(rng.randn(2, 3))
        kwargs = {"squared": call % 2 == 0} if call % 3 else {}
        args = (x, y) if call % 4 else (x, y, 3.0)
        assert_same(run(dynamic, "loss", args, kwargs), run(imperative, "loss", args, kwargs),
                    "call %d" % call, scaled=True)
    report = gluon_dyn.hybridize.report(dynamic)
    made = report["methods"]["loss"]
    assert made["fallback"] is None and made["internal_errors"] == []
    # Three profiled calls; graphs served the five others (one graph per keyword
    # value and scale: they are Python values of the key).
    assert made["calls"]["by_kind"]["graph"] == 5 and made["calls"]["last"] == "graph"
    # Calls the method made of the forward while it ran on graphs were inlined.
    assert report["calls"]["total"] == 3


def test_a_method_keys_its_graphs_on_recording_training_mode_and_arguments():
    """The same method recorded in training mode (its training-only term counts),
    recorded in predict mode and not recorded, on two batch sizes: each served right."""
    imperative, dynamic = twins(make_tagger, methods=("loss",))
    rng = np.random.RandomState(1)
    modes = [(True, True), (True, False), (False, False)]
    for call in range(12):
        record, train_mode = modes[call % 3]
        x = nd.array(rng.randn(2 + call % 2, 4))
        y = nd.array(rng.randn(2 + call % 2, 3))
        expected = run(imperative, "loss", (x, y), record=record, train_mode=train_mode)
        got = run(dynamic, "loss", (x, y), record=record, train_mode=train_mode)
        assert_same(got, expected, "call %d" % call, scaled=True)
    made = gluon_dyn.hybridize.report(dynamic)["methods"]["loss"]
    kinds = made["calls"]["by_kind"]
    # Graphs served every call after profiling but one whose speculated branch
    # went the other way (the call ran as written; the cache was emptied).
    assert made["fallback"] is None and kinds["graph"] + kinds["guard_failed"] == 9
    assert kinds["guard_failed"] <= 1
    # Training mode keys the graphs (recording alone does not); the batch size, seen
    # to vary while profiling, is an open dim of each: one graph per training mode.
    assert [miss.split(":")[0] for miss in made["cache_misses"]] == ["training mode"]
    assert made["cached_graphs"] == 2


def test_a_decoding_method_changes_python_state_as_written():
    imperative, dynamic = twins(make_tagger, methods=["decode"])
    for call in range(6):
        x = nd.array(np.random.RandomState(call).randn(2, 4))
        steps = 3 if call < 4 else 2
        assert_same(run(dynamic, "decode", (x, steps), record=False),
                    run(imperative, "decode", (x, steps), record=False), "call %d" % call)
    assert dynamic.decoded == imperative.decoded == 6
    made = gluon_dyn.hybridize.report(dynamic)["methods"]["decode"]
    assert made["calls"]["by_kind"]["graph"] == 3 and made["deferred_state"]["numbers"] == [
        "decoded"]


def test_a_method_with_a_host_read_runs_as_graph_segments(capsys):
    imperative, dynamic = twins(make_tagger, methods="monitored")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for call in range(6):
            x = nd.array(np.random.RandomState(call).randn(2, 4))
            assert_same(run(dynamic, "monitored", (x,)), run(imperative, "monitored", (x,)),
                        "call %d" % call, scaled=True)
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 12 and printed[0::2] == printed[1::2]
    made = gluon_dyn.hybridize.report(dynamic)["methods"]["monitored"]
    assert made["fallback"] is None and made["calls"]["last"] == "segments"
    assert "host read" in made["graph_segments"]["graph_breaks"][0]["why"]


class Scorer(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(2, in_units=3)

    def hybrid_forward(self, F, x):
        return F.relu(self.dense(x))

    def score(self, x, labels):
        logits = self(x)
        total = 0
        for row in range(x.shape[0]):
            total = total + logits[row, int(labels[row].asscalar())]
        return total


def test_a_hybrid_blocks_method_runs_on_graphs():
    imperative, dynamic = twins(Scorer, methods=("score",))
    for call in range(6):
        rng = np.random.RandomState(call)
        x, labels = nd.array(rng.randn(3, 3)), nd.array(rng.randint(0, 2, (3,)))
        assert_same(run(dynamic, "score", (x, labels)), run(imperative, "score", (x, labels)),
                    "call %d" % call, scaled=True)
    made = gluon_dyn.hybridize.report(dynamic)["methods"]["score"]
    assert made["fallback"] is None and made["calls"]["by_kind"]["graph"] == 3


def test_hybridize_again_without_methods_gives_the_class_methods_back():
    block = Tagger()
    block.initialize()
    block.hybridize(dynamic=True, methods=("loss",))
    assert "loss" in gluon_dyn.hybridize.report(block)["methods"]
    block.hybridize(dynamic=True)
    assert gluon_dyn.hybridize.report(block)["methods"] == {}
    assert "loss" not in vars(block)


def test_a_call_binding_no_parameters_raises_as_python_does():
    imperative, dynamic = twins(make_tagger, methods=("loss",))
    for block in (imperative, dynamic):
        with pytest.raises(TypeError, match="missing 1 required positional argument: 'y'"):
            block.loss(nd.ones((2, 4)))


@pytest.mark.parametrize("methods, message", [
    (("forward",), "runs through the block's runner already"),
    (("unknown",), "Tagger has no method 'unknown'"),
    (("collect_params",), "Gluon's own method"),
    (("decoded",), "Tagger has no method 'decoded'"),
    (("tags",), "Tagger.tags is a tuple, not a method"),
    ((3,), "takes names of methods"),
])
def test_methods_that_cannot_run_through_a_runner_are_named(methods, message):
    block = Tagger()
    with pytest.raises(ValueError, match=message):
        block.hybridize(dynamic=True, methods=methods)


def test_methods_need_the_dynamic_mode():
    with pytest.raises(ValueError, match="with dynamic=True"):
        Tagger().hybridize(methods=("loss",))
