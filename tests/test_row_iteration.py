"""Rows of a tensor, however the forward reaches them, are the rows an NDArray gives.

`for x in seq`, `enumerate`, `zip`, `reversed`, `range(len(seq))`, `seq[t + 1]` on a loop
counter, `seq[t]` on a Python int a graph loop carries, `seq[n]` on an int an `if` on a tensor
chose, `seq[seq.shape[0] - 1]`: traced into a graph specialised to the input shapes, and
exported as the general graph that computes lengths when it runs, each row has the rank and
the values it has imperatively. Exported files run in a fresh process with MXNet alone,
through SymbolBlock.imports and through Symbol.bind, on lengths, batch sizes and branches the
calls before export never had (issue 25: a `for x in seq` loop's rows broke `concat` there).
"""
import numpy as np
import pytest
from mxnet import gluon, nd

import gluon_dyn
from conftest import nd as array
from dynamic_twins import assert_same, calls_on_graphs, twins
from test_dynamic_export import imperative_twin, run_all_exported, trained

H, FEATURES = 3, 4


class Rows(gluon.Block):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = gluon.nn.Dense(H, in_units=FEATURES + H, activation="tanh")


class ForRows(Rows):
    """Issue 25's block: a loop over the rows, a bounded `while` keeping per-step outputs,
    an `if` on a tensor."""

    def forward(self, seq, steps):
        h = nd.zeros((seq.shape[1], H))
        for x in seq:
            h = self.cell(nd.concat(x, h, dim=1))
        kept = [h]
        i = nd.zeros((1,))
        while nd.sum(i) < nd.sum(steps) and nd.sum(h) < 4:
            h = nd.tanh(h) + 0.5
            kept.append(h)
            i = i + 1
        if nd.mean(h) > 0:
            h = h * 2
        return h, nd.stack(*kept)


class Enumerated(Rows):
    def forward(self, seq):
        h = nd.zeros((seq.shape[1], H))
        for t, x in enumerate(seq):
            h = self.cell(nd.concat(x * (t + 1), h, dim=1))
        return h


class Zipped(Rows):
    def forward(self, seq):
        h = nd.zeros((seq.shape[1], H))
        for a, b in zip(seq, nd.tanh(seq)):
            h = self.cell(nd.concat(a - b, h, dim=1))
        return h


class Reversed(Rows):
    def forward(self, seq):
        h = nd.zeros((seq.shape[1], H))
        for x in reversed(seq):
            h = self.cell(nd.concat(x, h, dim=1))
        return h


class LenRange(Rows):
    def forward(self, seq):
        h = nd.zeros((seq.shape[1], H))
        for t in range(len(seq)):
            h = self.cell(nd.concat(seq[t], h, dim=1))
        return h


class Differences(Rows):
    def forward(self, seq):
        h = nd.zeros((seq.shape[1], H))
        for t in range(seq.shape[0] - 1):
            h = self.cell(nd.concat(seq[t + 1] - seq[t], h, dim=1))
        return h


class Counter(Rows):
    """A Python int a `while` on a size carries; `seq[t - 1]` is the last row first."""

    def forward(self, seq):
        h = nd.zeros((seq.shape[1], H))
        t = 0
        while t < seq.shape[0]:
            h = self.cell(nd.concat(seq[t - 1], h, dim=1))
            t += 1
        return h


class LastRow(Rows):
    def forward(self, seq):
        return self.cell(nd.concat(seq[seq.shape[0] - 1], nd.zeros((seq.shape[1], H)), dim=1))


class Chosen(Rows):
    def forward(self, seq):
        n = 0
        if nd.sum(seq) > 0:
            n = 1
        return self.cell(nd.concat(seq[n], nd.zeros((seq.shape[1], H)), dim=1))


class Broken(Rows):
    """A `break` on a tensor: the branch setting the flag reads nothing."""

    def forward(self, seq):
        h = nd.zeros((seq.shape[1], H))
        for x in seq:
            h = self.cell(nd.concat(x, h, dim=1))
            if nd.sum(h) > 0.5:
                break
        return h


class ListedRows(Rows):
    def forward(self, seq):
        rows = list(seq)
        return self.cell(nd.concat(rows[-1] - rows[0], nd.zeros((seq.shape[1], H)), dim=1))


@pytest.mark.parametrize("program", [LenRange, Enumerated, Zipped, Reversed, ListedRows])
def test_builtins_give_rows_in_a_graph(program):
    imperative, dynamic = twins(program)
    rng = np.random.RandomState(1)
    for length in (3, 3, 3, 3, 5, 2, 5):
        seq = array(rng.randn(length, 2, FEATURES))
        assert_same(dynamic(seq), imperative(seq), "%s, %d rows" % (program.__name__, length))
    report = gluon_dyn.hybridize.report(dynamic)
    assert report["fallback"] is None and not report["internal_errors"], report
    assert calls_on_graphs(dynamic) >= 3


EXPORTED = [ForRows, Enumerated, Zipped, Reversed, LenRange, Differences, Counter, LastRow, Chosen,
            Broken]


def cases_of(program, rng):
    """Arguments of calls the traced ones never had: lengths 2, 6 and 9 (the traced calls
    had 3), batch 3 (they had 1), both signs of the inputs."""
    cases = []
    for length, batch, scale in ((2, 1, 1.0), (6, 1, -2.0), (9, 3, 0.5), (2, 3, -0.3)):
        seq = array(rng.randn(length, batch, FEATURES) * scale + scale)
        cases.append((seq, array([length % 6])) if program is ForRows else (seq,))
    return cases


@pytest.mark.parametrize("how", ["imports", "bind"])
def test_exported_rows_run_on_mxnet_alone(tmp_path, how):
    rng = np.random.RandomState(2)
    models, expected = [], []
    for program in EXPORTED:
        traced = [(array(rng.randn(3, 1, FEATURES)),) + ((array([2]),) if program is ForRows
                                                         else ())] * 4
        block = trained(program, traced)
        prefix = str(tmp_path / program.__name__)
        names = block.export(prefix, max_iterations=8)
        twin = imperative_twin(block, tmp_path)
        cases = cases_of(program, rng)
        outputs = [twin(*case) for case in cases]
        expected.append([[o.asnumpy() for o in (out if isinstance(out, tuple) else (out,))]
                         for out in outputs])
        models.append((prefix, names, [dict(zip(names, case)) for case in cases]))
    for program, got, want in zip(EXPORTED, run_all_exported(models, how), expected):
        for k, (outs, wants) in enumerate(zip(got, want)):
            for g, w in zip(outs, wants):
                assert g.shape == w.shape, (program.__name__, k, g.shape, w.shape)
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6,
                                           err_msg="%s, case %d" % (program.__name__, k))


def test_rows_made_a_python_list_stop_the_export_naming_the_line(tmp_path):
    block = trained(ListedRows, [(array(np.ones((3, 1, FEATURES))),)] * 4)
    with pytest.raises(gluon_dyn.ExportError, match=r"test_row_iteration.py:%d: list\(\) of a "
                       r"tensor needs its rows as Python values, but their number is computed "
                       r"by the graph" % (ListedRows.forward.__code__.co_firstlineno + 1)):
        block.export(str(tmp_path / "listed"))


def test_an_int_index_out_of_range_is_an_error_not_another_row(tmp_path):
    class Past(Rows):
        def forward(self, seq):
            t = 0
            h = nd.zeros((seq.shape[1], H))
            while t < 3 and nd.sum(h) < 100:   # a graph loop carrying t
                h = self.cell(nd.concat(seq[t], h, dim=1))
                t += 1
            return h

    block = trained(Past, [(array(np.ones((3, 1, FEATURES))),)] * 4)
    prefix = str(tmp_path / "past")
    names = block.export(prefix)
    with pytest.raises(AssertionError, match="take operator contains indices out of bound"):
        run_all_exported([(prefix, names, [{"data": array(np.ones((2, 1, FEATURES)))}])],
                         "imports")
    (outs,), = run_all_exported([(prefix, names, [{"data": array(np.ones((3, 1, FEATURES)))}])],
                                "imports")
    np.testing.assert_allclose(outs[0], imperative_twin(block, tmp_path)(
        array(np.ones((3, 1, FEATURES)))).asnumpy(), rtol=1e-5)
