"""NDArray attributes and methods read by traced code written for NDArrays: `.T`,
`.dtype`, `.size`, `.context`, `.ctx`, `.stype`, `as_in_context`, `copy`, `astype`,
`reshape(2, -1)`, `broadcast_to` more axes, `with x.context as ctx:`,
`Parameter.data(ctx)`, and the `mx.nd` functions mx.sym has no twin of (`nd.add`,
`nd.arange(ctx=...)`): the graph computes what NDArray code computes; what a graph
cannot do (`.grad`, another context) runs as Python, said so."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon, nd

import gluon_dyn  # noqa: F401
from idiom_twins import on_graphs, same_as_written

RNG = np.random.RandomState(7)


def calls(*shape, dtype="float32", count=6):
    return [(nd.array(RNG.randn(*shape) * 3, dtype=dtype),) for _ in range(count)]


class Attributes(gluon.Block):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.weight = self.params.get("weight", shape=(4, 4))
            self.dense = gluon.nn.Dense(4, in_units=4)

    def forward(self, x):
        with x.context as ctx:
            w = self.weight.data(ctx)
        h = self.dense(nd.dot(x, w.T))
        if h.dtype == np.float32 and x.stype == "default":
            h = h * h.size
        scale = nd.ones(h.shape, ctx=x.context, dtype=h.dtype)
        same = h.as_in_context(h.ctx)
        copied = h.copy()
        rounded = h.astype("int32").astype(h.dtype)
        kept = h.astype("float32", copy=False)
        flat = h.reshape(2, -1)
        wide = h[0].broadcast_to((2, 3, 4))
        total = nd.add(h, scale) + nd.subtract(2, h) + nd.maximum(h, 0)
        steps = nd.arange(4, ctx=x.context)
        return total, same, copied, rounded, kept, flat, wide, steps, h.T, h[0].T


def test_ndarray_attributes_on_traced_arrays():
    on_graphs(same_as_written(Attributes, calls(3, 4), train=True), 3)


class Dtypes(gluon.Block):
    """A branch on an argument's dtype: each dtype is its own graph."""

    def forward(self, x):
        if x.dtype == np.int32:
            return (x * 2).astype("float32")
        return x.astype("float16").astype("float32") + 1


def test_dtype_comes_from_the_inputs_dtypes():
    mixed = calls(3, 4, dtype="int32", count=4) + calls(3, 4, count=4)
    report = same_as_written(Dtypes, mixed)
    assert report["cached_graphs"] == 2 and report["calls"]["graph"] == 5, report["calls"]


class ReadsGrad(gluon.Block):
    def forward(self, x):
        y = x * 2
        seen = x.grad is None
        return y + 1, seen


def test_reading_grad_runs_as_python_between_graph_segments():
    report = same_as_written(ReadsGrad, calls(2, 3))
    breaks = report["graph_segments"]["graph_breaks"]
    assert "`.grad` reads the gradient buffer" in breaks[0]["why"]


class OtherContext(gluon.Block):
    def forward(self, x):
        y = x * 2
        return y.as_in_context(mx.cpu(1)) + 1


def test_moving_an_array_to_another_context_is_refused_naming_it():
    report = same_as_written(OtherContext, calls(2, 3))
    assert report["calls"]["graph"] == 0
    assert "as_in_context moves an array to cpu(1), but the graph runs on cpu(0)" in \
        report["fallback"], report["fallback"]


def test_outside_a_trace_symbols_keep_their_own_attributes():
    symbol = mx.sym.var("x")
    assert not hasattr(symbol, "T") and not hasattr(symbol, "context")
    with pytest.raises(mx.base.NotImplementedForSymbol):
        symbol.copy()
    assert symbol.reshape((2, -1)).list_inputs() == ["x"]


class PickedScores(gluon.HybridBlock):
    """GluonNLP's sampler step, written for NDArrays: rows picked by index arrays. (Its
    own code, which the converter leaves as written, is the corpus program
    gluonnlp_sequence_sampler: Symbol.__getitem__ takes such keys while tracing.)"""

    def hybrid_forward(self, F, scores, ids):
        picked = scores[mx.nd.arange(scores.shape[0]), ids]
        return picked * 2


class Sampler(gluon.Block):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(5, in_units=4)
            self.step = PickedScores()

    def forward(self, x):
        scores = self.dense(x)
        ids = nd.argmax(scores, axis=1) - 1      # -1 picks the last column, as NDArray does
        return self.step(scores, ids)


def test_index_arrays_in_a_converted_child_pick_as_ndarray_does():
    on_graphs(same_as_written(Sampler, calls(3, 4)), 3)


def test_symbols_keep_their_own_indexing_outside_a_trace():
    outputs = mx.sym.Group([mx.sym.var("a"), mx.sym.var("b")])
    assert outputs[1].name == "b"
    with pytest.raises(TypeError, match="integer index"):
        outputs[mx.nd.arange(2), mx.nd.arange(2)]
