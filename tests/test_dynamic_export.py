"""`net.export()` of blocks hybridized with dynamic=True: the general graph, loaded where
only MXNet is installed (a fresh process), agrees with the imperative model on lengths
and branches never seen before export, through SymbolBlock.imports and through
mx.sym.load + Symbol.bind; what cannot be a graph is an ExportError naming the line."""
import json
import os
import subprocess
import sys

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon

import gluon_dyn
from conftest import nd

HIDDEN, FEATURES = 8, 5


class Tagger(gluon.Block):
    """A `for` over a tensor's rows (range of its length), a data-dependent `while`, an
    `if` on a tensor, state kept on self, zeros sized from the input."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = gluon.rnn.LSTMCell(HIDDEN, input_size=FEATURES)
            self.head = gluon.nn.Dense(3, in_units=HIDDEN)
        self.state = None

    def forward(self, seq, steps):
        if self.state is None:
            self.state = [mx.nd.zeros((seq.shape[1], HIDDEN)), mx.nd.zeros((seq.shape[1], HIDDEN))]
        h = [s.detach() for s in self.state]
        out = mx.nd.zeros((seq.shape[1], HIDDEN))
        for t in range(seq.shape[0]):
            out, h = self.cell(seq[t], h)
        self.state = h
        i = mx.nd.zeros((1,))
        while mx.nd.sum(i) < mx.nd.sum(steps):
            out = mx.nd.tanh(out) * 1.5
            i = i + 1
        logits = self.head(out)
        if mx.nd.mean(logits) > 0:
            logits = logits * 2
        return logits


class HybridTagger(gluon.HybridBlock):
    """The same control flow written for F in hybrid_forward (no kept state)."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = gluon.nn.Dense(HIDDEN, in_units=FEATURES + HIDDEN, activation="tanh")
            self.head = gluon.nn.Dense(3, in_units=HIDDEN)

    def hybrid_forward(self, F, seq, h, steps):
        for row in seq:
            h = self.cell(F.concat(row, h, dim=1))
        i = F.zeros((1,))
        while F.sum(i) < F.sum(steps):
            h = F.tanh(h) * 1.5
            i = i + 1
        logits = self.head(h)
        if F.mean(logits) > 0:
            logits = logits * 2
        return logits


class Collector(gluon.Block):
    """Per-step outputs: a list appended to in a graph loop, then stacked."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(4, in_units=4)

    def forward(self, x, steps):
        outputs = [x]
        i = mx.nd.zeros((1,))
        while mx.nd.sum(i) < mx.nd.sum(steps):
            x = mx.nd.tanh(self.dense(x))
            outputs.append(x)
            i = i + 1
        return mx.nd.stack(*outputs)


def trained(cls, calls):
    """A block hybridized dynamic, called on `calls`; and its parameters' file."""
    mx.random.seed(3)
    block = cls()
    block.initialize(mx.init.Uniform(0.5))
    block.hybridize(dynamic=True)
    for args in calls:
        block(*args)
    return block


def imperative_twin(block, tmp_path):
    twin = type(block)()
    path = str(tmp_path / "twin.params")
    block.save_parameters(path)
    twin.load_parameters(path)
    return twin


LOADER = r'''
import json, sys
import numpy as np
import mxnet as mx   # no gluon_dyn here: MXNet alone must load and run the files
how, prefixes = sys.argv[1], sys.argv[2:]
for prefix in prefixes:
    cases = json.load(open(prefix + "-cases.json"))
    names = cases["names"]
    if how == "imports":
        block = mx.gluon.SymbolBlock.imports(prefix + "-symbol.json", names,
                                             prefix + "-0000.params")
        run = lambda feed: block(*[feed[n] for n in names])
    else:
        symbol = mx.sym.load(prefix + "-symbol.json")
        params = mx.nd.load(prefix + "-0000.params")
        args = {k[4:]: v for k, v in params.items() if k.startswith("arg:")}
        aux = {k[4:]: v for k, v in params.items() if k.startswith("aux:")}
        def run(feed):
            return symbol.bind(mx.cpu(), dict(args, **feed), aux_states=aux).forward()
    results = []
    dtypes = cases["dtypes"]
    for case in cases["cases"]:
        outs = run({n: mx.nd.array(np.array(v, dtype=dtypes[n]), dtype=dtypes[n])
                    for n, v in case.items()})
        outs = outs if isinstance(outs, (list, tuple)) else [outs]
        results.append([o.asnumpy().tolist() for o in outs])
    json.dump(results, open(prefix + "-results.json", "w"))
'''


def run_exported(prefix, names, cases, how):
    """Outputs of the exported files on `cases` ({input name: array}), in a fresh
    process that imports only MXNet."""
    return run_all_exported([(prefix, names, cases)], how)[0]


def run_all_exported(models, how):
    """run_exported of each (prefix, names, cases) of `models`, in one fresh process that
    imports only MXNet; `how`: through SymbolBlock.imports ("imports") or Symbol.bind, MXNet's
    static executor ("bind")."""
    for prefix, names, cases in models:
        with open(prefix + "-cases.json", "w") as f:
            json.dump({"names": names,
                       "dtypes": {n: np.dtype(v.dtype).name for n, v in cases[0].items()},
                       "cases": [{n: v.asnumpy().tolist() for n, v in case.items()}
                                 for case in cases]}, f)
    env = {"PATH": os.environ.get("PATH", ""), "MXNET_SUBGRAPH_VERBOSE": "0"}
    done = subprocess.run([sys.executable, "-c", LOADER, how] + [m[0] for m in models], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    results = []
    for prefix, _, _ in models:
        with open(prefix + "-results.json") as f:
            results.append([[np.array(o, dtype="float32") for o in outs]
                            for outs in json.load(f)])
    return results


@pytest.mark.parametrize("how", ["imports", "bind"])
def test_a_block_exports_its_general_graph(tmp_path, how):
    rng = np.random.RandomState(0)
    block = trained(Tagger, [(nd(rng.randn(4, 2, FEATURES)), nd([1]))] * 5)
    prefix = str(tmp_path / "tagger")
    names = block.export(prefix)
    assert names == ["data0", "data1", "state0", "state1"]
    graph_ops = {node["op"] for node in json.load(open(prefix + "-symbol.json"))["nodes"]}
    assert {"_while_loop", "_cond"} <= graph_ops and "gluon_dyn_grad_tie" not in graph_ops
    twin = imperative_twin(block, tmp_path)
    cases, expected = [], []
    # Lengths, batch sizes, trip counts and branches the traced calls never had.
    for length, batch, steps, scale in ((1, 2, 0, 1.0), (7, 3, 2, -3.0), (3, 1, 4, 3.0),
                                        (9, 2, 0, -1.0)):
        seq = nd(rng.randn(length, batch, FEATURES) * scale)
        state = [nd(rng.randn(batch, HIDDEN) * 0.1) for _ in range(2)]
        twin.state = [s.copy() for s in state]
        out = twin(seq, nd([steps]))
        expected.append([out.asnumpy()] + [s.asnumpy() for s in twin.state])
        cases.append({"data0": seq, "data1": nd([steps]), "state0": state[0], "state1": state[1]})
    for got, want in zip(run_exported(prefix, names, cases, how), expected):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_a_hybrid_block_exports_after_dynamic_calls(tmp_path):
    rng = np.random.RandomState(1)
    block = trained(HybridTagger, [(nd(rng.randn(3, 2, FEATURES)), nd(np.zeros((2, HIDDEN))),
                                    nd([1]))] * 4)
    prefix = str(tmp_path / "hybrid")
    names = block.export(prefix)
    assert names == ["data0", "data1", "data2"]
    twin = imperative_twin(block, tmp_path)
    cases, expected = [], []
    for length, steps, scale in ((5, 0, 1.0), (2, 3, -2.0), (8, 1, 2.0)):
        case = {"data0": nd(rng.randn(length, 2, FEATURES) * scale),
                "data1": nd(rng.randn(2, HIDDEN)), "data2": nd([steps])}
        expected.append(twin(case["data0"], case["data1"], case["data2"]).asnumpy())
        cases.append(case)
    for (got,), want in zip(run_exported(prefix, names, cases, "imports"), expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_per_step_outputs_need_max_iterations_and_keep_exactly_the_steps_run(tmp_path):
    rng = np.random.RandomState(2)
    block = trained(Collector, [(nd(rng.rand(2, 4)), nd([2]))] * 5)
    prefix = str(tmp_path / "collector")
    with pytest.raises(gluon_dyn.ExportError, match=r"test_dynamic_export.py:%d: this loop "
                       r"keeps per-step outputs .* give export max_iterations=N"
                       % (Collector.forward.__code__.co_firstlineno + 3)):
        block.export(prefix)
    names = block.export(prefix, max_iterations=6)
    twin = imperative_twin(block, tmp_path)
    cases = [{"data0": nd(rng.rand(3, 4)), "data1": nd([steps])} for steps in (0, 1, 5)]
    expected = [twin(case["data0"], case["data1"]).asnumpy() for case in cases]
    for (got,), want in zip(run_exported(prefix, names, cases, "imports"), expected):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


class HostRead(gluon.Block):
    def forward(self, x):
        if x.sum().asscalar() > 0:
            return x * 2
        return x


class IntSize(gluon.Block):
    def forward(self, x):
        return x[:, :x.shape[1] - 1]


class SplitBySize(gluon.Block):
    def forward(self, x):
        return mx.nd.split(x, num_outputs=x.shape[1], axis=1)[0]


def test_a_float64_model_exports_its_loops_per_step_outputs_and_their_bound(tmp_path):
    """The loop's bookkeeping (its rows ran, the check of its bound) in the outputs'
    dtype: float64 per-step outputs once failed MXNet's type check in the exported
    graph."""
    rng = np.random.RandomState(4)
    float64 = lambda values: mx.nd.array(values, dtype="float64")   # noqa: E731
    mx.random.seed(3)
    block = Collector()
    block.initialize(mx.init.Uniform(0.5))
    block.cast("float64")
    block.hybridize(dynamic=True)
    for _ in range(5):
        block(float64(rng.rand(2, 4)), nd([2]))
    prefix = str(tmp_path / "collector64")
    names = block.export(prefix, max_iterations=4)
    twin = Collector()
    twin.cast("float64")
    path = str(tmp_path / "twin.params")
    block.save_parameters(path)
    twin.load_parameters(path)
    cases = [{"data0": float64(rng.rand(3, 4)), "data1": nd([steps])} for steps in (0, 1, 4)]
    expected = [twin(case["data0"], case["data1"]).asnumpy() for case in cases]
    assert all(want.dtype == np.float64 for want in expected)
    for (got,), want in zip(run_exported(prefix, names, cases, "imports"), expected):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(AssertionError, match="take operator contains indices out of bound"):
        run_exported(prefix, names, [{"data0": float64(rng.rand(3, 4)), "data1": nd([5])}],
                     "imports")


def test_what_cannot_be_a_graph_is_named(tmp_path):
    prefix = str(tmp_path / "m")
    block = trained(HostRead, [(nd([[1.0, 2.0]]),)] * 4)
    with pytest.raises(gluon_dyn.ExportError, match=r"test_dynamic_export.py:%d: `asscalar` "
                       r"reads a tensor's value into Python" %
                       (HostRead.forward.__code__.co_firstlineno + 1)):
        block.export(prefix)
    block = trained(IntSize, [(nd([[1.0, 2.0]]),)] * 4)
    with pytest.raises(gluon_dyn.ExportError, match=r"test_dynamic_export.py:%d: an array's size "
                       r"is used as a Python int" % (IntSize.forward.__code__.co_firstlineno + 1)):
        block.export(prefix)
    block = trained(SplitBySize, [(nd([[1.0, 2.0]]),)] * 4)
    with pytest.raises(gluon_dyn.ExportError, match=r"test_dynamic_export.py:%d: an array's size "
                       r"read from a shape is passed to split" %
                       (SplitBySize.forward.__code__.co_firstlineno + 1)):
        block.export(prefix)


def test_export_needs_a_call_and_a_dynamic_block(tmp_path):
    prefix = str(tmp_path / "m")
    block = Collector()
    block.initialize()
    with pytest.raises(gluon_dyn.ExportError, match="export needs hybridize\\(dynamic=True\\)"):
        block.export(prefix)
    block.hybridize(dynamic=True)
    with pytest.raises(gluon_dyn.ExportError, match="call Collector once before export"):
        block.export(prefix)
    block(nd(np.ones((1, 4))), nd([1]))
    with pytest.raises(ValueError, match="a positive int bounds the loops"):
        block.export(prefix, max_iterations=0)
    with pytest.raises(TypeError):
        block.export(prefix, 0, True, 8)   # max_iterations is keyword-only


def test_a_loop_longer_than_max_iterations_fails_the_exported_run(tmp_path):
    """Rows cut at the bound would be wrong numbers: the exported graph fails instead (a
    node named after the loop, take in "raise" mode), and runs loops within the bound
    as imperative MXNet does."""
    rng = np.random.RandomState(3)
    block = trained(Collector, [(nd(rng.rand(2, 4)), nd([2]))] * 5)
    prefix = str(tmp_path / "collector")
    names = block.export(prefix, max_iterations=4)
    line = Collector.forward.__code__.co_firstlineno + 3
    assert "test_dynamic_export.py_line%d_ran_past_max_iterations_4" % line in \
        open(prefix + "-symbol.json").read()
    x = nd(rng.rand(3, 4))
    with pytest.raises(AssertionError, match="take operator contains indices out of bound"):
        run_exported(prefix, names, [{"data0": x, "data1": nd([5])}], "imports")
    (got,), = run_exported(prefix, names, [{"data0": x, "data1": nd([4])}], "imports")
    np.testing.assert_allclose(got, imperative_twin(block, tmp_path)(x, nd([4])).asnumpy(),
                               rtol=1e-5, atol=1e-6)
