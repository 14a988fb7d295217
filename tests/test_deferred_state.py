"""Python state kept in graphs: numbers on blocks that the forward changes (number
state), and lists appended to under branches and loops on tensors. Outputs,
gradients and the Python state match the imperative program call after call, and
graphs serve the calls."""
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_dyn
from conftest import nd


class Counting(gluon.Block):
    """Counters and a flag changed unconditionally and under a branch on a tensor."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(3, in_units=4)
        self.calls, self.positive, self.seen_negative, self.scale = 0, 0, False, 0.5

    def forward(self, x):
        self.calls += 1
        y = self.dense(x)
        if mx.nd.sum(y) > 0:
            self.positive += 2
        else:
            self.seen_negative = True
            y = y * self.scale
        return y * self.calls


class Collecting(gluon.Block):
    """Appends under a branch and in a loop on tensors, then stacks and adds them."""

    def __init__(self, consume="stack"):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(4, in_units=4)
        self.consume = consume

    def forward(self, x, limit):
        acc = [x]
        if mx.nd.sum(x) > 0:
            acc.append(self.dense(x))
        i = mx.nd.zeros((1,))
        while mx.nd.sum(i) < mx.nd.sum(limit):
            i = i + 1
            acc.append(mx.nd.tanh(self.dense(x)) * i)
            if mx.nd.sum(x) > 1:
                acc.append(x * 3)
                acc.append(x - 1)
        if self.consume == "stack":
            return mx.nd.sum(mx.nd.stack(*acc, axis=1), axis=1)
        if self.consume == "add_n":
            return mx.nd.add_n(*acc)
        if self.consume == "sum":
            return sum(acc)
        return mx.nd.concat(*acc, dim=0)


def twins(cls, *args, **options):
    mx.random.seed(0)
    blocks = [cls(*args), cls(*args)]
    for block in blocks:
        block.initialize(mx.init.Uniform(0.5))
    for (_, a), (_, b) in zip(sorted(blocks[0].collect_params().items()),
                              sorted(blocks[1].collect_params().items())):
        b.set_data(a.data())
    blocks[1].hybridize(dynamic=True, **options)
    return blocks


def run(block, *inputs):
    inputs = [a.copy() for a in inputs]
    inputs[0].attach_grad()
    block.collect_params().zero_grad()
    with autograd.record():
        out = block(*inputs)
    out.backward()
    grads = {name[len(block.prefix):]: p.grad().asnumpy() for name, p in
             block.collect_params().items()}
    return out.asnumpy(), inputs[0].grad.asnumpy(), grads


def assert_same(got, expected):
    for g, e in zip(got[:2], expected[:2]):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    for name in expected[2]:
        np.testing.assert_allclose(got[2][name], expected[2][name], rtol=1e-5, atol=1e-6,
                                   err_msg=name)


def test_numbers_a_forward_changes_stay_in_one_graph_and_keep_their_types():
    imperative, dynamic = twins(Counting)
    rng = np.random.RandomState(0)
    for call in range(10):
        x = nd(rng.randn(2, 4) * (1 if call % 3 else -1))
        assert_same(run(dynamic, x), run(imperative, x))
        for name in ("calls", "positive", "seen_negative", "scale"):
            got, expected = getattr(dynamic, name), getattr(imperative, name)
            assert type(got) is type(expected) and got == expected, name
        if call >= 3:
            assert gluon_dyn.hybridize.report(dynamic)["calls"]["last"] == "graph"
    report = gluon_dyn.hybridize.report(dynamic)
    assert report["fallback"] is None
    assert report["cached_graphs"] == 1   # the counters are graph inputs, not part of the key


def test_a_number_state_change_between_calls_is_read():
    imperative, dynamic = twins(Counting)
    x = nd(np.ones((2, 4)))
    for calls in (0, 7, 100, 3, 3):
        imperative.calls = dynamic.calls = calls
        assert_same(run(dynamic, x), run(imperative, x))
        assert dynamic.calls == imperative.calls == calls + 1


@pytest.mark.parametrize("consume", ["stack", "add_n", "sum", "concat"])
def test_appends_under_tensor_branches_and_loops(consume):
    # Not speculated: the appends stay under a cond and in a while_loop.
    imperative, dynamic = twins(Collecting, consume, speculate=False)
    rng = np.random.RandomState(1)
    calls = [(scale, limit) for scale in (0.4, -0.5, 2.0) for limit in (0, 1, 3)]
    for index, (scale, limit) in enumerate(calls * 2):
        x, n = nd(rng.rand(2, 4) * scale), nd([limit])
        assert_same(run(dynamic, x, n), run(imperative, x, n))
        assert gluon_dyn.hybridize.report(dynamic)["calls"]["last"] == "graph", index
    report = gluon_dyn.hybridize.report(dynamic)
    assert report["fallback"] is None and report["guard_failures"] == []
    fates = set(report["statements"].values())
    assert {"if: cond (graph)", "while: while_loop (graph)"} <= fates
    assert not any("speculated" in fate for fate in fates)


def test_a_loop_running_past_its_allotted_iterations_fails_its_guard_and_grows():
    imperative, dynamic = twins(Collecting, "add_n")
    x = nd(np.full((2, 4), 0.3))
    for limit in (1, 2, 1, 2, 2):   # profiled trip counts of 1 and 2: a bound of 64
        assert_same(run(dynamic, x, nd([limit])), run(imperative, x, nd([limit])))
    assert_same(run(dynamic, x, nd([100])), run(imperative, x, nd([100])))
    report = gluon_dyn.hybridize.report(dynamic)
    assert report["guard_failures"] == [
        "loop at %s ran past the 64 iterations allotted to its appends"
        % next(where for where, fate in report["statements"].items() if fate.startswith("while"))]
    assert report["not_speculated"] == {}    # a bound is profiled again, never given up
    assert_same(run(dynamic, x, nd([100])), run(imperative, x, nd([100])))
    assert gluon_dyn.hybridize.report(dynamic)["calls"]["last"] == "graph"


class ReadsAppended(gluon.Block):
    def forward(self, x):
        acc = []
        if mx.nd.sum(x) > 0:
            acc.append(x)
        return acc[0] if acc else x


def test_other_uses_of_a_list_appended_under_a_tensor_branch_run_as_python():
    imperative, dynamic = twins(ReadsAppended)
    for sign in (1, -1, 1, -1, 1):
        x = nd(np.ones((1, 2)) * sign)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = dynamic(x).asnumpy()
        np.testing.assert_allclose(got, imperative(x).asnumpy())
    assert "test_deferred_state.py:%d: a list appended to under a branch or loop on a tensor is " \
        "tested for truth in Python" % (ReadsAppended.forward.__code__.co_firstlineno + 4) in \
        gluon_dyn.hybridize.report(dynamic)["fallback"]


class Logging(gluon.Block):
    """Lists and dicts kept on the block, written by the forward (JANUS's deferred
    updates): appends, appends under a branch on a tensor, a dict item."""

    def __init__(self, read_history=False):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(4, in_units=4)
        self.history, self.events, self.cache = [], [], {}
        self.read_history = read_history

    def forward(self, x):
        h = self.dense(x)
        if self.read_history and len(self.history) % 2:
            h = h * 2
        self.history.append(h)
        self.cache["last"] = h * 3
        if mx.nd.sum(h) > 0:
            self.events.append("positive")
            self.events.append(h + 1)
        return h


def assert_same_containers(got, expected):
    assert len(got.history) == len(expected.history) and len(got.events) == len(expected.events)
    for g, e in zip(got.history + got.events, expected.history + expected.events):
        if isinstance(e, str):
            assert g == e
        else:
            np.testing.assert_allclose(g.asnumpy(), e.asnumpy(), rtol=1e-5, atol=1e-6)
    assert sorted(got.cache) == sorted(expected.cache)
    np.testing.assert_allclose(got.cache["last"].asnumpy(), expected.cache["last"].asnumpy(),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("read_history", [False, True])
def test_lists_and_dicts_on_blocks_are_updated_after_each_graph_run(read_history):
    imperative, dynamic = twins(Logging, read_history, speculate=False)
    for call in range(8):
        x = nd(np.full((2, 4), 0.5 if call % 3 else -0.5))
        assert_same(run(dynamic, x), run(imperative, x))
        assert_same_containers(dynamic, imperative)
        assert gluon_dyn.hybridize.report(dynamic)["calls"]["last"] == "graph"
    report = gluon_dyn.hybridize.report(dynamic)
    assert report["deferred_state"]["containers"] == ["cache", "events", "history"]
    # A list the forward reads (its length) stays in the key: one graph per length seen.
    assert report["deferred_state"]["containers_in_key"] == (["history"] if read_history else [])
    assert report["cached_graphs"] == (min(8, 16) if read_history else 1)


def test_a_failed_guard_applies_no_deferred_update():
    imperative, dynamic = twins(Logging)
    for sign in (1, 1, 1, 1, -1, 1):   # profiled positive; the negative call fails the guard
        x = nd(np.full((2, 4), 0.5 * sign))
        assert_same(run(dynamic, x), run(imperative, x))
        assert_same_containers(dynamic, imperative)
    assert gluon_dyn.hybridize.report(dynamic)["guard_failures"]


class Reorders(gluon.Block):
    def __init__(self):
        super().__init__()
        self.seen = []

    def forward(self, x):
        self.seen.insert(0, x * 2)
        return x + 1


def test_other_changes_to_a_kept_list_run_as_python():
    imperative, dynamic = twins(Reorders)
    for _ in range(5):
        x = nd(np.ones((1, 2)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = dynamic(x).asnumpy()
        np.testing.assert_allclose(got, imperative(x).asnumpy())
    assert len(dynamic.seen) == len(imperative.seen) == 5
    assert "`list.insert`" in gluon_dyn.hybridize.report(dynamic)["fallback"] or \
        "other than by appending" in gluon_dyn.hybridize.report(dynamic)["fallback"]


class ReadsWhatItWrote(gluon.Block):
    """Writes a number, a log and a dict on itself, then reads them back in the same
    forward: the number in arithmetic, the log's length, the dict's entry."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(4, in_units=5)
        self.count = 0
        self.history = []
        self.last = {}

    def forward(self, x):
        self.count += 1
        h = self.dense(x)
        self.history.append(h.sum())
        self.last["h"] = h
        return h * self.count + self.last["h"]


def test_state_the_forward_writes_then_reads():
    imperative, dynamic = twins(ReadsWhatItWrote, check_speed=False)
    for call in range(7):
        x = mx.nd.random.normal(shape=(2, 5))
        got, expected = dynamic(x), imperative(x)
        np.testing.assert_allclose(got.asnumpy(), expected.asnumpy(), rtol=1e-5, atol=1e-5)
        assert dynamic.count == imperative.count == call + 1
        assert len(dynamic.history) == len(imperative.history) == call + 1
        np.testing.assert_allclose(dynamic.history[-1].asnumpy(),
                                   imperative.history[-1].asnumpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(dynamic.last["h"].asnumpy(), imperative.last["h"].asnumpy(),
                                   rtol=1e-5, atol=1e-5)
    report = gluon_dyn.hybridize.report(dynamic)
    assert not report["internal_errors"] and report["calls"]["graph"] == 4


class RebindsItsLog(gluon.Block):
    """d2l's TransformerDecoder: a new list of lists on every call, filled by index
    with arrays the forward computed (`self._attention_weights[0][i] = ...`)."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.layers = gluon.nn.Sequential()
            self.layers.add(gluon.nn.Dense(4, in_units=4), gluon.nn.Dense(4, in_units=4))
        self.weights = []

    def forward(self, x):
        self.weights = [[None] * len(self.layers) for _ in range(2)]
        for i, layer in enumerate(self.layers):
            x = mx.nd.tanh(layer(x))
            self.weights[0][i] = x
            self.weights[1][i] = x * 2
        return x


def test_a_list_the_forward_replaces_is_written_back_and_not_keyed():
    imperative, dynamic = twins(RebindsItsLog, check_speed=False)
    for call in range(8):
        x = mx.nd.random.normal(shape=(2, 4))
        assert_same(run(dynamic, x), run(imperative, x))
        assert [len(row) for row in dynamic.weights] == [2, 2]
        for got, expected in zip(sum(dynamic.weights, []), sum(imperative.weights, [])):
            np.testing.assert_allclose(got.asnumpy(), expected.asnumpy(), rtol=1e-5, atol=1e-6)
    report = gluon_dyn.hybridize.report(dynamic)
    # The list the previous call left is not read: one graph serves every call.
    assert report["calls"]["last"] == "graph" and report["traces"] == 1
