"""Speculation: profile the first calls, inline branches and unroll loops behind guards,
fall back to imperative on a failed guard, and stop assuming what failed."""
import json
import math

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

import gluon_dyn
from conftest import graph_ops, nd
from gluon_dyn.hybridize.call.dynamic import runner_of


class Speculative(gluon.Block):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(2, in_units=2)
        self.state = None

    def forward(self, x, limit):
        steps = mx.nd.zeros((1,))
        while mx.nd.sum(steps) < mx.nd.sum(limit):
            x = mx.nd.tanh(self.dense(x))
            steps = steps + 1
        if mx.nd.sum(x) > -100:
            x = x * 2
        else:
            x = x - 1
        self.state = x
        return x


def pair():
    mx.random.seed(0)
    blocks = [Speculative(), Speculative()]
    for block in blocks:
        block.initialize(mx.init.Uniform(0.5))
    for (_, a), (_, b) in zip(sorted(blocks[0].collect_params().items()),
                              sorted(blocks[1].collect_params().items())):
        b.set_data(a.data())
    blocks[1].hybridize(dynamic=True, profile_calls=3)
    return blocks


def run(block, limit):
    x = nd([[0.3, -0.4]])
    x.attach_grad()
    block.collect_params().zero_grad()
    with autograd.record():
        out = block(x, nd([limit]))
    out.backward()
    return out.asnumpy(), x.grad.asnumpy(), block.dense.weight.grad().asnumpy(), \
        block.state.asnumpy()


def assert_same(a, b):
    for u, v in zip(a, b):
        np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6)


def test_fixed_trip_count_unrolls_and_a_new_count_falls_back_then_relaxes():
    imperative, dynamic = pair()
    for _ in range(5):                       # 3 profiled calls, then the speculative graph
        assert_same(run(dynamic, 2), run(imperative, 2))
    report = gluon_dyn.hybridize.report(dynamic)
    assert report["traces"] == 1 and report["guard_failures"] == []
    assert report["calls"]["by_kind"] == dict(report["calls"]["by_kind"], profiling=3, graph=2)
    fates = set(report["statements"].values())
    assert "while: unrolled 2 iterations (speculated, guarded)" in fates
    assert "if: inlined the then branch (speculated, guarded)" in fates
    (executor,) = runner_of(dynamic).cache.values()
    ops = graph_ops(json.loads(executor.capture.symbol.tojson()))
    assert "_while_loop" not in ops and "_cond" not in ops
    # Three loop tests (two iterations, then the exit) and the branch, in the guard vector.
    assert len(executor.capture.guards) == 4

    # A new trip count fails the guard inside the graph: this call runs imperatively,
    # with nothing half-written, and the loop is no longer unrolled.
    state_before = dynamic.state.asnumpy().copy()
    assert_same(run(dynamic, 3), run(imperative, 3))
    report = gluon_dyn.hybridize.report(dynamic)
    assert len(report["guard_failures"]) == 1
    assert "trip count differs from 2" in report["guard_failures"][0]
    assert not np.allclose(dynamic.state.asnumpy(), state_before)   # written by the imperative run
    for limit in (1, 4, 0):
        assert_same(run(dynamic, limit), run(imperative, limit))
    report = gluon_dyn.hybridize.report(dynamic)
    assert len(report["guard_failures"]) == 1 and report["traces"] == 2
    assert report["calls"]["last"] == "graph" and report["calls"]["by_kind"]["guard_failed"] == 1
    assert "while: while_loop (graph)" in report["statements"].values()


class Speculative64(gluon.Block):
    """A loop and a branch on the data, for float64 arrays."""

    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(2, in_units=2, dtype="float64")

    def forward(self, x):
        h = self.dense(x)
        while mx.nd.sum(h) < 2:
            h = h + 1
        if mx.nd.sum(h) > 100:
            h = h * 2
        else:
            h = h - 1
        return h


def test_a_float64_model_speculates_as_a_float32_one():
    """Its loop and branch tests are float64 values: each guard is made float32 in the
    guard vector (a test compared with a float32 zero failed MXNet's type inference,
    and the block ran as Python)."""
    blocks = [Speculative64(), Speculative64()]
    for block in blocks:
        mx.random.seed(0)
        block.initialize(mx.init.Uniform(0.5))
    imperative, dynamic = blocks
    dynamic.hybridize(dynamic=True, profile_calls=3, check_speed=False)
    for shift in (0.5, 0.5, 0.5, 0.5, 0.5, -1.5, 0.5, 0.5):
        x = mx.nd.array([[0.3 + shift, -0.4]], dtype="float64")
        outputs = []
        for block in blocks:
            x.attach_grad()
            with autograd.record():
                out = block(x)
            out.backward()
            outputs.append((out.asnumpy(), x.grad.asnumpy()))
        assert outputs[0][0].dtype == np.float64
        assert_same(outputs[1], outputs[0])
    report = gluon_dyn.hybridize.report(dynamic)
    assert report["internal_errors"] == [] and report["fallback"] is None, report
    assert report["calls"]["by_kind"]["graph"] >= 3 and len(report["guard_failures"]) == 1


def test_guard_failure_in_the_middle_of_training_gives_imperative_gradients():
    imperative, dynamic = pair()
    trainers = [gluon.Trainer(b.collect_params(), "sgd", {"learning_rate": 0.1})
                for b in (imperative, dynamic)]
    for limit in (1, 1, 1, 1, 1, 2, 2, 1, 0, 1):
        for block, trainer in zip((imperative, dynamic), trainers):
            x = nd([[0.3, -0.4]])
            x.attach_grad()
            with autograd.record():
                out = block(x, nd([limit]))
            out.backward()
            trainer.step(1, ignore_stale_grad=True)
    for (_, a), (_, b) in zip(sorted(imperative.collect_params().items()),
                              sorted(dynamic.collect_params().items())):
        np.testing.assert_allclose(b.data().asnumpy(), a.data().asnumpy(), rtol=1e-5, atol=1e-6)
    assert gluon_dyn.hybridize.report(dynamic)["guard_failures"]


def test_an_assumption_is_made_again_until_it_has_failed_max_guard_failures_times():
    mx.random.seed(0)
    imperative, dynamic = Speculative(), Speculative()
    for block in (imperative, dynamic):
        block.initialize(mx.init.Constant(0.1))
    dynamic.hybridize(dynamic=True, profile_calls=2, max_guard_failures=2)
    limits = [1, 1, 1, 2, 2, 3, 3, 1]
    for limit in limits:
        assert_same(run(dynamic, limit), run(imperative, limit))
    report = gluon_dyn.hybridize.report(dynamic)
    # 1 assumed, fails at 2 and is re-assumed as 2; fails at 3: the second failure relaxes it.
    assert [m.split(": ")[-1] for m in report["guard_failures"]] == [
        "trip count differs from 1", "trip count differs from 2"]
    assert "while: while_loop (graph)" in report["statements"].values()


class BatchFree(gluon.Block):
    """Never reads its input's batch size."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(3, in_units=8)

    def forward(self, x):
        y = self.dense(x)
        if mx.nd.sum(y) > 0:
            y = y * 2
        return y


class BatchReader(BatchFree):
    """Reads its input's batch size (to build a zero state)."""

    def forward(self, x):
        return self.dense(x) + mx.nd.zeros((x.shape[0], 3))


class ComputedColumns(BatchFree):
    """Indexes a computed value by its columns, taking its rows whole."""

    def forward(self, x):
        h = self.dense(x)
        return h[:, 0] + h[:, 1:].sum(axis=1) * h[:, -1]


class ComputedWidth(BatchFree):
    """Reads the width of a computed value (d2l's attention: `d = queries.shape[-1]`);
    InputWidth, of its argument; ComputedHeight, the number of rows of a computed value."""

    def forward(self, x):
        h = self.dense(x)
        return h / math.sqrt(h.shape[-1])


class InputWidth(BatchFree):
    def forward(self, x):
        return self.dense(x) * x.shape[1]


class ComputedHeight(BatchFree):
    def forward(self, x):
        h = self.dense(x)
        return h * h.shape[0]


class ComputedLastRow(BatchFree):
    """Indexes a computed value's rows: its last one, and all but its first."""

    def forward(self, x):
        h = self.dense(x)
        return h[-1] + h[1:, 2].sum()


class SumLastRow(gluon.Block):
    """The last row of the sum of its two arguments: MXNet infers the sum's rows from
    either argument's (elemwise_add takes equal shapes)."""

    def forward(self, x, y):
        return mx.nd.elemwise_add(x, y)[-1]


def run_batches(cls, batches):
    mx.random.seed(0)
    imperative, dynamic = cls(), cls()
    for block in (imperative, dynamic):
        block.initialize(mx.init.Constant(0.05))
    dynamic.hybridize(dynamic=True, speculate=False)
    rng = np.random.RandomState(0)
    for batch in batches:
        x = nd(rng.randn(batch, 8))
        np.testing.assert_allclose(dynamic(x).asnumpy(), imperative(x).asnumpy(), rtol=1e-5)
    return gluon_dyn.hybridize.report(dynamic)


def test_a_dimension_never_read_is_relaxed_once_it_varies():
    # (4, 8): an exact graph; (3, 8): batch varied and was never read -> a (?, 8) graph,
    # which (2, 8), (6, 8) and (4, 8) reuse.
    report = run_batches(BatchFree, [4, 3, 2, 6, 4])
    assert report["traces"] == 2 and report["cached_graphs"] == 2


def test_a_computed_value_indexed_by_its_columns_is_relaxed_once_the_batch_varies():
    # h = dense(x) has x's rows; taking them whole reads no size of x.
    report = run_batches(ComputedColumns, [4, 3, 2, 6, 4])
    assert report["traces"] == 2 and report["cached_graphs"] == 2
    assert report["calls"]["graph"] == 5


class NumpyColumns(BatchFree):
    """ComputedColumns under MXNet's numpy interface (d2l's box coordinates)."""

    def forward(self, x):
        h = self.dense(x)
        return h[:, 0] * h[:, 2]


def test_a_computed_value_indexed_by_its_columns_in_numpy_code_is_relaxed_too():
    with mx.util.np_shape(True), mx.util.np_array(True):
        imperative, dynamic = NumpyColumns(), NumpyColumns()
        for block in (imperative, dynamic):
            block.initialize(mx.init.Uniform(0.5))
        for a, b in zip(imperative.collect_params().values(), dynamic.collect_params().values()):
            b.set_data(a.data())
        dynamic.hybridize(dynamic=True, speculate=False)
        rng = np.random.RandomState(0)
        for batch in [4, 3, 2, 6, 4]:
            x = mx.np.array(rng.randn(batch, 8), dtype="float32")
            np.testing.assert_allclose(dynamic(x).asnumpy(), imperative(x).asnumpy(), rtol=1e-5)
    report = gluon_dyn.hybridize.report(dynamic)
    assert report["traces"] == 2 and report["calls"]["graph"] >= 4


def test_the_width_of_a_computed_value_read_into_python_reads_no_batch_size():
    for reads_width in (ComputedWidth, InputWidth):
        report = run_batches(reads_width, [4, 3, 2, 6, 4])
        assert report["traces"] == 2 and report["calls"]["graph"] == 5, reads_width
    report = run_batches(ComputedHeight, [4, 3, 4, 2])
    assert report["traces"] == 3


def test_a_computed_value_indexed_by_its_rows_keeps_the_batch_in_the_key():
    # h[-1] and h[1:] depend on how many rows x has: a graph per batch size. The
    # first graph was traced for exact shapes; the second, for any batch, read it.
    report = run_batches(ComputedLastRow, [4, 3, 4, 2])
    assert report["traces"] == 3
    assert report["cache_misses"] == [
        "argument array 0 dim 0: expected 4, got any size (it varied, no trace read it)",
        "argument array 0 dim 0: expected 3, got 2"]


def test_a_size_that_two_arguments_fix_together_keeps_both_in_the_key():
    # Neither argument's rows may be left open, though each alone fixes the sum's.
    block = SumLastRow()
    block.hybridize(dynamic=True, speculate=False)
    rng = np.random.RandomState(0)
    for batch in [4, 3, 2, 4]:
        x, y = nd(rng.randn(batch, 5)), nd(rng.randn(batch, 5))
        np.testing.assert_allclose(block(x, y).asnumpy(), (x + y)[-1].asnumpy(), rtol=1e-6)
    report = gluon_dyn.hybridize.report(block)
    assert report["traces"] == 3 and report["calls"]["graph"] == 4


def test_a_graph_that_read_a_dimension_is_specialised_to_it():
    report = run_batches(BatchReader, [4, 3, 4, 2])
    assert report["traces"] == 3
    # (the third call, batch 4 again, reuses the first graph)
    assert report["cache_misses"] == ["argument array 0 dim 0: expected 4, got 3",
                                      "argument array 0 dim 0: expected 3, got 2"]
