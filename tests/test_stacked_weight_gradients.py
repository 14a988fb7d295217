"""Repeated products' weight gradients made one (gluon_dyn/hybridize/stacked_weight_gradients.py)
and operators replaced by faster equivalents (equivalent_ops.py).

Each model runs imperatively and through hybridize(dynamic=True) on the same
parameters; outputs, the input's gradient and every parameter's gradient must
agree on calls served by a graph, and each test shows which graph ran: the
recorded runs' graph computes the recurrent weight's gradient outside it (its
products read the weight through BlockGrad, StepGradients gives the gradient) or
keeps MXNet's per-step gradients, as the test says."""
import json

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

from gluon_dyn import native
from gluon_dyn.hybridize import custom_gradient, equivalent_ops, stacked_weight_gradients
from gluon_dyn.hybridize.dynamic import report, runner_of
from test_planned_backward import train_alike, twin_blocks
from test_row_projections import CELLS, reachable, run

TOLERANCE = dict(rtol=1e-5, atol=1e-5)


class Loop(gluon.Block):
    """A cell over the rows of `seq`, every output stacked (the benchmarks' loop)."""

    def __init__(self, cell="lstm", hidden=6, features=3):
        super().__init__()
        with self.name_scope():
            self.cell = CELLS[cell](hidden, input_size=features)

    def forward(self, seq):
        state = self.cell.begin_state(batch_size=seq.shape[1])
        outputs = []
        for t in range(seq.shape[0]):
            out, state = self.cell(seq[t], state)
            outputs.append(out)
        return mx.nd.stack(*outputs)


def data(shape, seed):
    return mx.nd.array(np.random.RandomState(seed).standard_normal(shape))


def recorded_graph(block):
    """The graph of the block's recorded runs, as MXNet ran it (JSON)."""
    graphs = [executor.recording_graph for executor in runner_of(block).cache.values()
              if executor.recording_graph is not None]
    assert len(graphs) == 1
    return json.loads(graphs[0].tojson())


def stacked_weights(block):
    """Names of the weights whose gradients the block's recorded runs stack."""
    return sorted(weight for graph in report(block)["recorded_graphs"]
                  for weight in graph["stacked_weights"])


def agree(make, shape, calls=4, input_gradient=True):
    """Both blocks on `calls` sequences, recorded and for inference; every call
    after the profiled one served by a graph."""
    imperative, dynamic = twin_blocks(make)
    for call in range(calls):
        seq = data(shape, call)
        expected, got = run(imperative, seq, input_gradient), run(dynamic, seq, input_gradient)
        np.testing.assert_allclose(got[0], expected[0], **TOLERANCE)
        if input_gradient:
            np.testing.assert_allclose(got[1], expected[1], **TOLERANCE)
        for name in expected[2]:
            np.testing.assert_allclose(got[2][name], expected[2][name], err_msg=name,
                                       **TOLERANCE)
        np.testing.assert_allclose(dynamic(seq).asnumpy(), imperative(seq).asnumpy(),
                                   **TOLERANCE)
    by_kind = report(dynamic)["calls"]["by_kind"]
    assert by_kind["graph"] == 2 * calls - 1 and by_kind["fallback"] == 0, by_kind
    return dynamic


@pytest.mark.parametrize("cell", sorted(CELLS))
def test_a_recurrent_weight_gets_one_gradient_product_and_matches_imperative(cell):
    dynamic = agree(lambda: Loop(cell), (9, 2, 3))
    prefix = dynamic.cell.prefix
    assert stacked_weights(dynamic) == [prefix + "h2h_weight"]
    graph = recorded_graph(dynamic)
    products = [node for node in graph["nodes"] if node["op"] == "FullyConnected"]
    # one input product over all rows, then 9 recurrent products without weight gradients
    assert len(products) == 10
    blocked = [node for node in products if node["name"].endswith("_data_gradient_only")]
    assert len(blocked) == 9
    # LSTM and RNN cells add the recurrent product to the step's input product:
    # the step gradients are added to those rows at once; a GRU splits it first.
    names = [node["name"] for node in graph["nodes"]]
    per_step = sum(name.endswith("_with_step_gradient") for name in names)
    assert per_step == (9 if cell == "gru" else 0)
    assert any(name.endswith("_step_gradients_added") for name in names) == (cell != "gru")
    for node in blocked:
        for entry in node["inputs"][1:]:
            reads = graph["nodes"][entry[0]]
            while reads["op"] in ("identity", "_copy"):   # gradient_sums' tree of reads
                reads = graph["nodes"][reads["inputs"][0][0]]
            assert reads["op"] == "BlockGrad", reads


class Penalty(gluon.HybridBlock):
    """x plus the squared size of a Dense's weight (its parameters shared)."""

    def __init__(self, dense):
        super().__init__(params=dense.params)
        self.weight = self.params.get("weight")
        self.bias = self.params.get("bias")

    def hybrid_forward(self, F, x, weight, bias):
        return F.broadcast_add(x, F.sum(weight * weight) + F.sum(bias))


class TiedWeights(gluon.Block):
    """One Dense applied at every step to the state; its weight is read once more,
    by a penalty on its size: both reads give it a gradient."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.step = gluon.nn.Dense(8, in_units=8)
            self.penalty = Penalty(self.step)

    def forward(self, x):
        h = x
        for _ in range(5):
            h = mx.nd.tanh(self.step(h) + x)
        return self.penalty(h)


def test_a_weight_also_read_elsewhere_gets_both_gradients():
    dynamic = agree(TiedWeights, (2, 8))
    assert len(stacked_weights(dynamic)) == 1


class DenseSteps(gluon.Block):
    """A Dense applied at every step to the state (its own options)."""

    def __init__(self, steps, **dense):
        super().__init__()
        self.steps = steps
        with self.name_scope():
            self.step = gluon.nn.Dense(**dense)

    def forward(self, x):
        h = x
        for _ in range(self.steps):
            h = mx.nd.tanh(self.step(h)) + h * 0.5
        return h


def test_products_without_bias():
    # 2 rows x (4 + 4) <= 4 x 4
    dynamic = agree(lambda: DenseSteps(6, units=4, in_units=4, use_bias=False), (2, 4))
    assert len(stacked_weights(dynamic)) == 1


def test_products_over_three_dimensional_rows():
    """FullyConnected with flatten=False on (batch, positions, features) rows."""
    dynamic = agree(lambda: DenseSteps(4, units=8, in_units=8, flatten=False), (1, 2, 8))
    assert len(stacked_weights(dynamic)) == 1


class Wide(Loop):
    """64 rows per step against a 6 x 3 weight: stacking would cost more."""


def test_products_of_many_rows_keep_their_per_step_gradients():
    dynamic = agree(Wide, (5, 64, 3), calls=3)
    assert stacked_weights(dynamic) == []
    assert not any(node["name"].endswith("_data_gradient_only")
                   for node in recorded_graph(dynamic)["nodes"])


@pytest.mark.parametrize("grad_req", ["write", "add"])
def test_training_steps_with_gradients_written_or_added(grad_req):
    imperative, dynamic = twin_blocks(lambda: Loop("gru"))
    train_alike(imperative, dynamic, grad_req, (7, 2, 3), 5)
    assert stacked_weights(dynamic) == [dynamic.cell.prefix + "h2h_weight"]
    assert report(dynamic)["calls"]["last"] == "graph"


def test_two_recorded_calls_then_one_backward():
    """Each call's StepGradients keeps the rows of its own call."""
    imperative, dynamic = twin_blocks(lambda: Loop("lstm"))
    grads = {}
    for block in (imperative, dynamic):
        block(data((6, 2, 3), 0))   # the profiled call
        with autograd.record():
            first, second = block(data((6, 2, 3), 1)), block(data((6, 2, 3), 2))
            loss = (first * second).sum()
        loss.backward()
        grads[block] = {name.split("_", 1)[1]: p.grad().asnumpy()
                        for name, p in block.collect_params().items()}
    for name, expected in grads[imperative].items():
        np.testing.assert_allclose(grads[dynamic][name], expected, err_msg=name, **TOLERANCE)
    assert len(stacked_weights(dynamic)) == 1
    made = report(dynamic)
    assert made["calls"]["by_kind"]["graph"] == 2 and not made["internal_errors"], made


def test_a_weight_computed_in_the_graph_is_left_as_it_is():
    x, w = mx.sym.var("x"), mx.sym.var("w")
    scaled = w * 2
    h = x
    for _ in range(3):
        h = mx.sym.FullyConnected(h, scaled, no_bias=True, num_hidden=4)
    assert stacked_weight_gradients.stacked(h, {"x": (1, 4), "w": (4, 4)}) is None


def test_equivalent_ops_compute_what_they_replace():
    """Forward and gradients; splits along the first axis (squeezed) and later ones."""
    x = mx.sym.var("x")
    gates = mx.sym.SliceChannel(x, num_outputs=4, axis=1)
    third = mx.sym.SliceChannel(mx.sym.reshape(x, (2, 4, 6)), num_outputs=2, axis=2)
    symbol = mx.sym.Group([mx.sym.tanh(gates[0]), mx.sym.sigmoid(gates[1]), gates[2] * gates[3],
                           third[0] - third[1]])
    rewritten = equivalent_ops.rewritten(symbol, {"x": np.float32})
    ops = [node["op"] for node in json.loads(rewritten.tojson())["nodes"]]
    assert "tanh" not in ops and "sigmoid" not in ops and ops.count("Activation") == 2
    assert "SliceChannel" not in ops and ops.count(native.SPLIT_OP) == 2
    rows = mx.sym.SliceChannel(x, num_outputs=2, axis=0, squeeze_axis=True)
    symbol = mx.sym.Group(list(symbol) + [rows[1] * 3])
    rewritten = equivalent_ops.rewritten(symbol, {"x": np.float32})
    computes_alike(rewritten, symbol, mx.nd.random.normal(shape=(2, 24)))


def computes_alike(rewritten, symbol, value):
    """Both graphs give the same outputs and input gradient on `value`."""
    results = []
    for graph in (rewritten, symbol):
        data = value.copy()
        data.attach_grad()
        with autograd.record():
            outputs = mx.nd.CachedOp(graph)(data)
            loss = sum((out * (k + 1)).sum() for k, out in enumerate(outputs))
        loss.backward()
        results.append([out.asnumpy() for out in outputs] + [data.grad.asnumpy()])
    for got, expected in zip(*results):
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def reachable_ops(symbol):
    graph = json.loads(symbol.tojson())
    return [graph["nodes"][index]["op"] for index in reachable(graph)]


def test_a_split_of_every_part_of_a_split_is_split_the_other_way_first():
    """Steps of rows (T, B, 3H), each split into three gates: 1 + 3 splits, not 1 + T."""
    x = mx.sym.var("x")
    steps = mx.sym.SliceChannel(x, num_outputs=5, axis=0, squeeze_axis=True)
    gates = [mx.sym.SliceChannel(steps[t], num_outputs=3, axis=1) for t in range(5)]
    symbol = mx.sym.Group([mx.sym.tanh(gates[t][g]) * (t + g + 1)
                           for t in range(5) for g in range(3)])
    rewritten = equivalent_ops.rewritten(symbol, {"x": np.float32})
    assert reachable_ops(rewritten).count(native.SPLIT_OP) == 4
    computes_alike(rewritten, symbol, mx.nd.random.normal(shape=(5, 2, 6)))


def test_stacks_of_every_part_of_a_split_or_of_the_first_rows_are_no_copies():
    """stack(split(y)) is y; stack(x[0], .., x[n-1]) one slice; parts out of order,
    along another axis, or of different arrays stay stacked."""
    x = mx.sym.var("x")
    y = mx.sym.tanh(x)
    parts = mx.sym.SliceChannel(y, num_outputs=4, axis=0, squeeze_axis=True)
    rows = [mx.sym.reshape(mx.sym.slice_axis(x, axis=0, begin=t, end=t + 1), (-3, -2))
            for t in range(3)]
    other_rows = [mx.sym.reshape(mx.sym.slice_axis(y, axis=0, begin=t, end=t + 1), (-3, -2))
                  for t in range(2)]
    symbol = mx.sym.Group([
        mx.sym.stack(*[parts[t] for t in range(4)]) * 2,                      # y
        mx.sym.stack(*rows) * 3,                                              # x[:3]
        mx.sym.stack(*[parts[t] for t in (1, 0, 2, 3)]),                      # stays
        mx.sym.stack(*[parts[t] for t in range(4)], axis=1),                  # stays
        mx.sym.stack(rows[0], other_rows[1])])                                # stays
    rewritten = equivalent_ops.rewritten(symbol, {"x": np.float32})
    assert reachable_ops(rewritten).count("stack") == 3
    assert reachable_ops(rewritten).count("slice_axis") == 3
    computes_alike(rewritten, symbol, mx.nd.random.normal(shape=(4, 2, 3)))
    # every row of an array of known shape, stacked: the array
    symbol = mx.sym.stack(*rows) * 3
    rewritten = equivalent_ops.rewritten(symbol, {"x": np.float32}, {"x": (3, 2, 3)})
    assert reachable_ops(rewritten) == ["null", "_mul_scalar"]
    computes_alike(rewritten, symbol, mx.nd.random.normal(shape=(3, 2, 3)))


def test_rnn_param_concats_become_gluon_dyn_concat():
    """Inputs of different lengths along the axis, flat (an RNN's weights) and 2-d
    along a later axis; forward and gradients."""
    x = mx.sym.var("x")
    flat = mx.sym.reshape(x, (-1,))
    concat = mx.sym._internal._rnn_param_concat     # pylint: disable=protected-access
    symbol = mx.sym.Group([
        concat(flat, flat * 2, mx.sym.slice_axis(flat, axis=0, begin=0, end=5), dim=0,
               num_args=3),
        concat(x, mx.sym.slice_axis(x, axis=1, begin=0, end=2), dim=1, num_args=2)])
    rewritten = equivalent_ops.rewritten(symbol, {"x": np.float32})
    assert reachable_ops(rewritten).count(native.CONCAT_OP) == 2
    assert "_rnn_param_concat" not in reachable_ops(rewritten)
    computes_alike(rewritten, symbol, mx.nd.random.normal(shape=(4, 6)))


def test_equivalent_ops_leave_other_dtypes_alone():
    x = mx.sym.var("x")
    symbol = mx.sym.tanh(x)
    assert equivalent_ops.rewritten(symbol, {"x": np.float64}) is symbol


class ScaleAndShift(custom_gradient.Function):
    def forward(self, a, b):
        return a * 2 + b

    def backward(self, gradient):
        return gradient * 2, gradient


def test_custom_gradients_are_written_or_added_as_each_input_requests():
    """MXNet 1.9.1's autograd.Function adds nothing under grad_req='add' and skips
    every input after one whose gradient is not requested."""
    a, b, c = mx.nd.ones((3,)), mx.nd.ones((3,)), mx.nd.ones((3,))
    a.attach_grad("null")
    b.attach_grad("add")
    c.attach_grad("write")
    b.grad[:] = 1
    c.grad[:] = 5
    with autograd.record():
        out = ScaleAndShift()(a, b) + ScaleAndShift()(c, c)
    out.backward()
    np.testing.assert_array_equal(b.grad.asnumpy(), [2, 2, 2])    # 1 + 1
    np.testing.assert_array_equal(c.grad.asnumpy(), [3, 3, 3])    # 2 + 1, written
