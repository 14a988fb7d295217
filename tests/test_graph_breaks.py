"""Graph breaks: a forward with host reads or `print` in the middle runs as graph
segments around them. Outputs, gradients and Python state equal the imperative
program's; the segments serve the calls; a statement that must run as Python runs
exactly once per call, even when a later segment's guard fails."""
import sys
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_dyn
from conftest import nd

READS = []   # what the breaking statements saw, call after call


class Monitored(gluon.Block):
    """Dense layers around a host read deciding a branch, and a running metric."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.first = gluon.nn.Dense(4, in_units=4)
            self.second = gluon.nn.Dense(3, in_units=4)
        self.total = 0.0

    def forward(self, x):
        h = mx.nd.tanh(self.first(x)) * 2
        if h.sum().asscalar() > 0:
            h = h + 1
        READS.append(float(h.mean().asscalar()))
        self.total += READS[-1]
        y = self.second(h)
        if mx.nd.sum(y) > 0:      # a tensor branch after the breaks: speculated, guarded
            y = y * 3
        return y


def twins(cls):
    mx.random.seed(0)
    blocks = [cls(), cls()]
    for block in blocks:
        block.initialize(mx.init.Uniform(0.5))
    for (_, a), (_, b) in zip(sorted(blocks[0].collect_params().items()),
                              sorted(blocks[1].collect_params().items())):
        b.set_data(a.data())
    blocks[1].hybridize(dynamic=True, check_speed=False)
    return blocks


def run(block, x):
    x = x.copy()
    x.attach_grad()
    block.collect_params().zero_grad()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with autograd.record():
            out = block(x)
        out.backward()
    grads = [p.grad().asnumpy() for _, p in sorted(block.collect_params().items())]
    return [out.asnumpy(), x.grad.asnumpy()] + grads


def assert_same(got, expected):
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_host_reads_in_the_middle_run_between_graph_segments():
    imperative, dynamic = twins(Monitored)
    rng = np.random.RandomState(0)
    for call in range(12):
        x = nd(rng.rand(2, 4) * (1 if call % 4 else -1))
        READS.clear()
        expected = run(imperative, x)
        imperative_reads = list(READS)
        READS.clear()
        assert_same(run(dynamic, x), expected)
        # once per call, the same values (graphs compute tanh with oneDNN: last bits differ)
        assert len(READS) == len(imperative_reads)
        np.testing.assert_allclose(READS, imperative_reads, rtol=1e-5)
        # A float kept on the block and changed by graphs is float32 there.
        np.testing.assert_allclose(dynamic.total, imperative.total, rtol=1e-5)
        if call >= 3:   # a segment whose guard fails runs as Python: "segments_in_python"
            assert gluon_dyn.hybridize.report(dynamic)["calls"]["last"].startswith("segments")
    report = gluon_dyn.hybridize.report(dynamic)
    assert report["fallback"] is None
    breaks = report["graph_segments"]["graph_breaks"]
    assert breaks[0]["at"].endswith("test_graph_breaks.py:%d" % (
        Monitored.forward.__code__.co_firstlineno + 2)) and "host read" in breaks[0]["why"]
    # The segment after the first break breaks again (the metric): three segments.
    (first, rest) = report["graph_segments"]["segments"]
    # 9 calls after 3 profiled; graphs served at least 8 of each part (the first part
    # keys its graphs on the block's float `total`, which changes every call).
    assert first["calls"]["graph"] >= 8 and rest["graph_segments"]["segments"]
    assert report["calls"]["by_kind"]["segments"] >= 8


class Printing(gluon.Block):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(2, in_units=2)

    def forward(self, x):
        h = self.dense(x) * 2
        print("step", h.shape)
        return mx.nd.relu(h) + 1


def test_print_runs_every_call_between_segments(capsys):
    imperative, dynamic = twins(Printing)
    for _ in range(6):
        assert_same(run(dynamic, nd([[1.0, -2.0]])), run(imperative, nd([[1.0, -2.0]])))
    printed = capsys.readouterr().out.splitlines()
    assert printed == ["step (1, 2)"] * 12
    assert gluon_dyn.hybridize.report(dynamic)["calls"]["last"] == "segments"


class ReturnsEarly(gluon.Block):
    def forward(self, x):
        if x.sum().asscalar() > 100:
            return x
        return x * 2


def test_a_break_that_may_return_runs_as_python_and_the_rest_as_a_graph():
    imperative, dynamic = twins(ReturnsEarly)
    for value in (1.0, 200.0, 1.0, 3.0, 1.0, 300.0, 2.0):
        assert_same(run(dynamic, nd([[value]])), run(imperative, nd([[value]])))
    report = gluon_dyn.hybridize.report(dynamic)
    assert report["fallback"] is None
    (after,) = report["graph_segments"]["segments"]
    # After 3 profiled calls, the graph segment served every call but 300's, which
    # returned in the break before it.
    assert after["calls"]["graph"] == 3 and report["calls"]["by_kind"]["breaks_only"] == 1


class DetectorWithPostprocessing(gluon.Block):
    """A detector that gives its raw predictions when training and post-processes them
    with host reads otherwise (d2l's SSD: `if autograd.is_training(): return ...`,
    then its Python NMS)."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(4, in_units=4)

    def forward(self, x):
        scores = mx.nd.tanh(self.dense(x))
        if autograd.is_training():
            return scores
        kept = [i for i, row in enumerate(scores) if row[0].asscalar() > 0]
        return scores[kept] * 2 if kept else scores


def test_a_graph_part_that_may_return_before_a_break_runs_on_graphs():
    """The statements before the break hold a `return` on a Python condition: they
    are a graph segment that says whether it returned, and training calls, which
    return there, run on graphs (they ran as Python before)."""
    imperative, dynamic = twins(DetectorWithPostprocessing)
    rng = np.random.RandomState(4)
    served = []
    for call in range(8):
        x = nd(rng.randn(3, 4))
        assert_same(run(dynamic, x), run(imperative, x))
        served.append(gluon_dyn.hybridize.report(dynamic)["calls"]["last"])
        with autograd.pause():
            np.testing.assert_allclose(dynamic(x).asnumpy(), imperative(x).asnumpy(),
                                       rtol=1e-5, atol=1e-6)
    report = gluon_dyn.hybridize.report(dynamic)
    assert report["fallback"] is None
    assert served[2:] == ["segments"] * 6, served
    assert report["calls"]["graph"] == report["calls"]["after_profiling"] == 13, report["calls"]


class ReturnsEarlyThenBranches(gluon.Block):
    """A break that may return, then a tensor branch (speculated, guarded)."""

    def forward(self, x):
        if x.sum().asscalar() > 100:
            return x
        y = x * 2
        if mx.nd.sum(y) > 0:
            y = y * 3
        return y


def test_a_call_counts_as_on_graphs_only_when_every_segment_that_ran_ran_on_graphs():
    imperative, dynamic = twins(ReturnsEarlyThenBranches)
    served = []
    for value in (1.0, 2.0, 1.0, 3.0, 200.0, -1.0, 4.0):
        assert_same(run(dynamic, nd([[value]])), run(imperative, nd([[value]])))
        served.append(gluon_dyn.hybridize.report(dynamic)["calls"]["last"])
    # 200 returns in the break before the graph segment runs: no graph served it;
    # -1 fails the segment's guard, so that segment ran as Python.
    assert served == ["profiling"] * 3 + ["segments", "breaks_only", "segments_in_python",
                                          "segments"]
    assert gluon_dyn.hybridize.report(dynamic)["calls"]["graph"] == 2


class MaybeAssigned(gluon.Block):
    """A variable the Python part may leave unassigned, then read: Python's error."""

    def forward(self, x):
        for _ in range(int(x.sum().asscalar())):
            row = x * 2
        return row + 1


def test_a_variable_the_python_part_left_unassigned_raises_as_python_does():
    imperative, dynamic = twins(MaybeAssigned)
    for value in (1.0, 2.0, 1.0, 1.0):
        assert_same(run(dynamic, nd([[value]])), run(imperative, nd([[value]])))
    for block in (imperative, dynamic):
        with pytest.raises(UnboundLocalError, match="'row'"):
            block(nd([[0.0]]))


class ReassignedAfterABranch(gluon.Block):
    """`pick` is set only in one branch of a tensor `if`, then set again by the
    breaking statement: the graph part before the break must not hand it on (it may
    be unassigned there), whichever way the branch goes."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(4, in_units=4)

    def forward(self, x):
        h = self.dense(x)
        if mx.nd.sum(h) > 0:
            pick = 1
            h = h * 2
        pick = 3 if h.sum().asscalar() > 0 else 0      # a host read deciding in Python
        return h[:, pick] + h.sum()


def test_a_variable_the_break_assigns_first_is_not_handed_on():
    imperative, dynamic = twins(ReassignedAfterABranch)
    rng = np.random.RandomState(3)
    for call in range(8):
        x = nd(rng.randn(2, 4) * (1 if call % 3 else -4))
        assert_same(run(dynamic, x), run(imperative, x))
    report = gluon_dyn.hybridize.report(dynamic)
    assert report["fallback"] is None and report["calls"]["by_kind"]["segments"] >= 3



RAN_CODE = []   # the code objects Noting.forward ran as


class Noting(gluon.Block):
    """A child whose forward the conversion converts in place."""

    def forward(self, value):
        RAN_CODE.append(sys._getframe().f_code)   # pylint: disable=protected-access
        return value


class CallsAChildInTheBreak(gluon.Block):
    """A host read passed to a child block, between two Dense layers."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.first = gluon.nn.Dense(4, in_units=4)
            self.noting = Noting()
            self.second = gluon.nn.Dense(2, in_units=4)

    def forward(self, x):
        h = self.first(x)
        READS.append(self.noting(h.sum().asscalar()))
        return self.second(h)


def test_what_the_python_between_segments_calls_runs_as_written():
    """The statements between graph segments run as Python; the blocks they call run
    their own code, not their converted code (which cost GluonNLP's beam search, its
    loop between segments, 1.7x imperative's time)."""
    imperative, dynamic = twins(CallsAChildInTheBreak)
    for call in range(6):
        x = nd(np.full((2, 4), 0.1 * (call + 1)))
        assert_same(run(dynamic, x), run(imperative, x))
    RAN_CODE.clear()
    assert_same(run(dynamic, x), run(imperative, x))
    assert gluon_dyn.hybridize.report(dynamic)["calls"]["last"] == "segments"
    assert RAN_CODE == [Noting.forward.__code__] * 2


class Step(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(4, in_units=4)

    def hybrid_forward(self, F, x):
        return F.tanh(self.dense(x))


class Sampler:
    """A loop that stops on a host read, calling a decoder: GluonNLP's
    SequenceSampler's shape (a plain object, not a block)."""

    def __init__(self, decoder):
        self.decoder = decoder

    def __call__(self, x):
        for _ in range(6):
            x = self.decoder(x) * 1.5
            if x.sum().asscalar() < 0:
                break
        return x


class Generator(gluon.Block):
    """The sampler's call is the whole forward: no graph segment can be cut."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.step = Step()
        self.sampler = Sampler(self.step)

    def forward(self, x):
        return self.sampler(x)


def test_a_forward_that_runs_as_python_gets_graphs_at_its_child_blocks():
    imperative, dynamic = twins(Generator)
    rng = np.random.RandomState(2)
    for call in range(10):
        x = nd(rng.randn(2, 4))
        assert_same(run(dynamic, x), run(imperative, x))
    made = gluon_dyn.hybridize.report(dynamic)
    assert made["fallback"] and "whole forward" in made["fallback"]
    (child,) = made["child_runners"].values()
    # The child's calls after its profiling ran on its graph, and the parent's
    # calls since its fallback count as on graphs through them.
    assert child["calls"]["graph"] == child["calls"]["after_profiling"] > 0
    assert made["calls"]["by_kind"]["child_graphs"] > 0
    assert made["calls"]["last"] == "child_graphs"


SAME_SOURCE = '''import mxnet as mx
from mxnet import gluon

SCALE = {scale}


class Metered(gluon.Block):
    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(3, in_units=4)
        self.seen = []

    def forward(self, x):
        h = mx.nd.tanh(self.dense(x)) * SCALE
        self.seen.append(float(h.mean().asscalar()))
        return h + 1
'''


def test_the_same_forward_written_in_two_files_breaks_in_each_files_own_lines(tmp_path):
    """Two modules of the same source (a model copied into another file): each
    forward is converted from its own file, so its graph break is in it and its
    calls run as graph segments (malt kept one conversion for equal code objects)."""
    import importlib.util
    for name, scale in (("first_copy", 2.0), ("second_copy", 3.0)):
        path = tmp_path / ("%s.py" % name)
        path.write_text(SAME_SOURCE.format(scale=scale))
        spec = importlib.util.spec_from_file_location(name, str(path))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        imperative, dynamic = twins(module.Metered)
        rng = np.random.RandomState(0)
        for _ in range(6):
            x = nd(rng.rand(2, 4))
            assert_same(run(dynamic, x), run(imperative, x))
        np.testing.assert_allclose(dynamic.seen, imperative.seen, rtol=1e-5)
        report = gluon_dyn.hybridize.report(dynamic)
        assert report["fallback"] is None, report["fallback"]
        [graph_break] = report["graph_segments"]["graph_breaks"]
        assert graph_break["at"] == "%s:15" % path
        assert report["calls"]["by_kind"]["segments"] >= 3
