"""Item assignment into arrays (`x[i, j] = v`, `x[:] = y`, `x[idx] = 0`, `x[i] += v`) in
a traced forward: the results of NDArray's __setitem__, in a graph, and every holder
of the array (other names, lists, attributes, views) sees the change as imperatively.

Under autograd.record(), MXNet 1.9.1 refuses an in-place assignment into or from an
array in the computational graph ("Inplace operations ... are not supported when
recording with autograd"): such a statement runs as Python (a graph break), so the
dynamic block raises the same error, and assignments of constants into new arrays
stay in the graph with the same gradients.
"""
import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon, nd

import gluon_dyn
from gluon_dyn.hybridize.conversion import transpiler
from dynamic_twins import assert_same, gradients, twins
from idiom_twins import on_graphs, same_as_written

RNG = np.random.RandomState(5)


def arrays(*shape, count=6):
    return [(nd.array(RNG.randn(*shape)),) for _ in range(count)]


class Layered(gluon.Block):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(4, in_units=4)


class BasicForms(Layered):
    """Ints, slices with steps, negative indices, `...` and None, whole arrays, scalars
    and smaller arrays broadcast, values of another dtype, `+=`."""

    def forward(self, x):
        h = self.dense(x)
        m = nd.zeros((3, 4))
        m[0] = 1
        m[1, 1:3] = 2.5
        m[-1, ::2] = nd.array([7, 8], dtype="int32")
        m[:, 3] = h[0, :3]
        m[..., 0] = h[1, 0]
        m[2, None, 1:] = h[2, 1:]
        m[1, 0] += h[0, 0]
        whole = nd.ones((2, 4))
        whole[:] = h[:2] * 3
        scalar_whole = nd.ones((2, 2))
        scalar_whole[:, :] = 4
        return h * m.sum(), m, whole, scalar_whole


class AdvancedForms(Layered):
    """Index arrays from the arguments, lists, a float `mask` (indices, in legacy
    NDArray semantics), an index computed in the graph, and mixed keys."""

    def forward(self, x, rows):
        h = self.dense(x)
        m = nd.zeros((3, 4))
        m[rows] = 1
        m[[0, 2], 1] = h[0, :2]
        mask = (h[1] > 0)
        m[mask, 2] = -1
        m[nd.argmax(h[2, :3], axis=0)] = h[2]
        m[1:, [0, 3]] = 9
        return m, h


def test_basic_forms_of_assignment_match_ndarray_in_a_graph():
    report = same_as_written(BasicForms, arrays(3, 4))
    on_graphs(report, 3)


def test_advanced_forms_of_assignment_match_ndarray_in_a_graph():
    calls = [(nd.array(RNG.randn(3, 4)), nd.array(RNG.randint(0, 3, size=2)))
             for _ in range(6)]
    report = same_as_written(AdvancedForms, calls)
    on_graphs(report, 3)


class AdvancedReads(Layered):
    """Reading by constant index lists, as the right side of `m[0, [3, 3]] *= 2`
    reads: repeated and negative positions, lists beside ints and slices, adjacent
    or apart (NumPy's axis order), nested lists; a copy, not a view."""

    def forward(self, x):
        h = self.dense(x)
        m = h.reshape((3, 2, 2)) + 0
        m[0, [1, 1]] *= 2
        picked = m[[2, 0]]
        copy = h[[0, 0, 1], 1:3]
        copy[0] = 5                         # not into h
        return (picked, copy, h[1, [-1, 2]], m[:, [0, 1], 1], m[[0, 1], :, [1, 0]],
                h[[[0, 1]]], m, h)


class HybridAdvancedReads(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(4, in_units=4)

    def hybrid_forward(self, F, x):
        mask = F.ones((1, 4))
        mask[0, [0, 3]] *= 2
        return self.dense(x) * mask


def test_reads_by_index_lists_match_ndarray_in_a_graph():
    on_graphs(same_as_written(AdvancedReads, arrays(3, 4)), 3)
    on_graphs(same_as_written(HybridAdvancedReads, arrays(3, 4)), 3)


class Holders(Layered):
    """Every holder of an array assigned into sees the change: another name, a list,
    an attribute, a view (`row = m[1]`, a reshape), and the array a view is of."""

    def forward(self, x):
        h = self.dense(x)
        m = nd.zeros((3, 4))
        alias = m
        held = [m]
        self.kept = m
        row = m[1]
        flat = m.reshape((-1,))
        m[1, 0] = h[0, 0]
        row[2] = h[1, 1]            # through the view, into m
        flat[0] = h[2, 2]           # through the reshape, into m
        column = h.T                # not a view: a copy
        h2 = h.copy()
        h2[0] = 0
        same = h[0].T               # 1-D: the row itself
        return alias, held[0], row, flat, column, h2, h, same


def test_every_holder_of_an_array_sees_an_assignment():
    report = same_as_written(Holders, arrays(3, 4))
    on_graphs(report, 3)


class ColumnWrittenThrough(gluon.Block):
    """`x[:, 0]` views x's memory only when x has one row: a write into the column
    changes h for a batch of 1, and leaves it for larger ones."""

    def forward(self, x):
        h = x * 2 + 1
        column = h[:, 0]
        column[:] = 5
        return h, column


def test_a_view_only_some_batch_sizes_give_follows_each_size():
    # The batch varies from the second call on, and the graph depends on it (1 or more).
    calls = [(nd.array(RNG.randn(batch, 4)),) for batch in (1, 1, 3, 1, 2, 3)]
    report = same_as_written(ColumnWrittenThrough, calls, profile_calls=1)
    on_graphs(report, 5)
    # (the assignment read the batch: batch 2 is not served by batch 3's graph)
    assert "argument array 0 dim 0: expected 3, got 2" in report["cache_misses"]


class LoopCarried(Layered):
    """Assignments inside a loop and a branch on tensors: graph operators carry the
    arrays assigned into."""

    def forward(self, x):
        h = self.dense(x)
        acc = nd.zeros((1, 4))
        i = nd.zeros((1,))
        while nd.sum(i) < 3:
            acc[0, 1:] = acc[0, 1:] + h[0, 1:]
            i = i + 1
        if nd.sum(h) > 0:
            acc[0, 0] = 5
        return acc


def test_assignments_in_graph_loops_and_branches():
    report = same_as_written(LoopCarried, arrays(3, 4), speculate=False)   # nothing profiled
    on_graphs(report, 6)
    assert any("while_loop" in fate for fate in report["statements"].values())


class AliasedInLoop(Layered):
    """`kept` holds the array a graph loop assigns into: the loop carries a new value,
    which `kept` would not see; the block must not compute it so."""

    def forward(self, x):
        h = self.dense(x)
        acc = nd.zeros((1, 4))
        kept = acc
        i = nd.zeros((1,))
        while nd.sum(i) < 2:
            acc[0] = acc[0] + h[0]
            i = i + 1
        return acc, kept


def test_an_assignment_in_a_graph_loop_into_an_array_held_elsewhere_runs_as_python():
    """The loop runs as Python between graph segments, which keep `kept` and `acc` one
    array (outputs.py)."""
    report = same_as_written(AliasedInLoop, arrays(3, 4), speculate=False)
    first = AliasedInLoop.forward.__code__.co_firstlineno
    breaks = report["graph_segments"]["graph_breaks"]
    assert [each["at"].rsplit(":", 1)[1] for each in breaks] == [str(first + 6)]
    assert "it is also assigned to `kept` (line %d)" % (first + 3) in breaks[0]["why"], breaks
    assert report["calls"]["by_kind"]["segments"] == 6


class ArgumentWritten(Layered):
    def forward(self, x):
        x[0] = 0
        return self.dense(x)


def test_assigning_into_an_argument_changes_the_callers_array():
    imperative, dynamic = [ArgumentWritten() for _ in range(2)]
    for block in (imperative, dynamic):
        mx.random.seed(0)
        block.initialize(mx.init.Uniform(0.5))
    dynamic.hybridize(dynamic=True)
    for _ in range(5):
        x = nd.array(RNG.randn(3, 4))
        given = [x.copy(), x.copy()]
        outputs = [block(array) for block, array in zip((imperative, dynamic), given)]
        np.testing.assert_allclose(outputs[1].asnumpy(), outputs[0].asnumpy(), rtol=1e-5)
        np.testing.assert_allclose(given[1].asnumpy(), given[0].asnumpy())
        assert (given[1][0].asnumpy() == 0).all()
    report = gluon_dyn.hybridize.report(dynamic)
    segments = report["graph_segments"]
    assert segments and "takes as an input" in segments["graph_breaks"][0]["why"]
    assert report["calls"]["by_kind"]["segments"] == 2


class ConstantsWhileRecording(Layered):
    """A mask built from constants, read by a layer: legal while autograd records."""

    def forward(self, x):
        mask = nd.ones((3, 4))
        mask[:, 0] = 0
        mask[1] = 0.5
        return self.dense(x) * mask


class RecordedWhileRecording(Layered):
    def forward(self, x):
        h = self.dense(x)
        out = nd.zeros((3, 4))
        out[0] = h[0]
        return out


def test_while_recording_constants_stay_in_the_graph_with_their_gradients():
    report = same_as_written(ConstantsWhileRecording, arrays(3, 4), train=True)
    on_graphs(report, 3)


def test_while_recording_an_assignment_of_recorded_values_raises_as_mxnet_does():
    written = RecordedWhileRecording()
    written.initialize()
    with pytest.raises(mx.base.MXNetError, match="Inplace operations"):
        with mx.autograd.record():
            written(nd.ones((3, 4)))
    report = same_as_written(RecordedWhileRecording, arrays(3, 4), train=True)  # raise alike
    assert report["calls"]["graph"] == 0
    breaks = report["graph_segments"]["graph_breaks"]
    assert "assignment into an array while autograd records" in breaks[0]["why"], breaks


class Containers(Layered):
    """Lists and dicts keep Python's item assignment."""

    def forward(self, x):
        parts = [None, None]
        parts[0] = self.dense(x)
        parts[1] = parts[0] * 2
        named = {}
        named["sum"] = parts[0] + parts[1]
        return named["sum"], parts


def test_lists_and_dicts_keep_pythons_item_assignment():
    on_graphs(same_as_written(Containers, arrays(3, 4)), 3)


def test_the_converter_rebinds_the_name_assigned_into():
    def forward(self, x, k):
        x[0, 1:k] += 1
        self.buf[k] = x
        x[0][k] = 2
        return x
    source = transpiler.converted_source(forward)
    assert "x = ag__.ld(ag__).set_item(ag__.ld(x), (0, ag__.ld(ag__).item_slice(1, " in source
    assert "ag__.ld(self).buf = ag__.ld(ag__).set_item(ag__.ld(self).buf, " in source
    assert "its target `x[0]` is not a name converted code can rebind" in source


def test_the_alias_analysis_names_what_else_may_hold_the_array():
    from gluon_dyn.hybridize.conversion.converters import item_assignment
    import ast
    tree = ast.parse("def f(a, b):\n"
                     "    c = nd.zeros((2,))\n"
                     "    d = c\n"
                     "    e = nd.zeros((2,))\n"
                     "    keep = [e]\n"
                     "    g = nd.ones((2,))\n"
                     "    g2 = g.reshape((2, 1))\n"
                     "    for row in b:\n"
                     "        pass\n"
                     "    return c, d\n").body[0]
    reasons = item_assignment.analyze(tree)
    assert reasons["a"] == "it is a parameter, which the caller holds too"
    assert "`d = c`" in reasons["c"] or "assigned to `d`" in reasons["c"]
    assert "put in a container" in reasons["e"]
    assert "set from another array's holder" in reasons["g2"]
    assert "loop variable" in reasons["row"]
    assert "return" not in reasons.get("c", "")


class AnchoredScores(Layered):
    """Scores and anchors made from constants, as d2l's TinySSD returns them (anchors
    from `multibox_prior`, which reads only shapes and Python lists)."""

    def forward(self, x):
        sizes = nd.array([0.2, 0.4, 0.6, 0.8])
        anchors = nd.tile(sizes.reshape((1, 4)), (x.shape[0], 1)) * 2
        return self.dense(x), anchors


def test_while_recording_outputs_made_from_constants_stay_writable_on_every_graph_call():
    """Code after the call writes into what it computes from the anchors under record
    (d2l's multibox_target: `jaccard[:, box_idx] = ...`), legal imperatively since
    they have no history. The constants a graph keeps are inputs of every recorded
    run, and MXNet gives such an input a variable node without gradient: that is no
    history either, on the second graph call as on the first."""
    imperative, dynamic = twins(AnchoredScores)
    for call, (x,) in enumerate(arrays(3, 4, count=7)):
        results = []
        for block in (imperative, dynamic):
            with mx.autograd.record():
                scores, anchors = block(x)
                iou = anchors * 1
                iou[:, 0] = -1
                loss = (scores * iou).sum()
            loss.backward()
            results.append((iou, gradients(block)))
        assert_same(results[1], results[0], "call %d" % call)
    on_graphs(gluon_dyn.hybridize.report(dynamic), 4)
