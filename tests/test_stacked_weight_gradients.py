"""Repeated products' weight gradients made one (gluon_dyn/hybridize/passes/stacked_weight_gradients.py)
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

import gluon_dyn
from gluon_dyn import graph_json, native
from gluon_dyn.hybridize.passes import custom_gradient, equivalent_ops, stacked_weight_gradients
from gluon_dyn.hybridize.call.dynamic import report, runner_of
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


def stacked_alike(symbol, shapes):
    """The StackedGradients of `symbol` (`shapes`: every input's), after checking that
    it gives the outputs and every input's gradient `symbol` gives, recorded."""
    made = stacked_weight_gradients.stacked(symbol, shapes)
    assert made is not None
    made.run_with(mx.nd.CachedOp(made.symbol))
    results = []
    for run_graph in (mx.nd.CachedOp(symbol), made):
        inputs = [data(shapes[name], seed) for seed, name in enumerate(symbol.list_inputs())]
        for array in inputs:
            array.attach_grad()
        with autograd.record():
            outputs = run_graph(*inputs)
            outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
            loss = sum((out * out * (k + 1)).sum() for k, out in enumerate(outputs))
        loss.backward()
        results.append([out.asnumpy() for out in outputs] + [a.grad.asnumpy() for a in inputs])
    assert len(results[1]) == len(results[0])
    for name, got, expected in zip(["output"] * (len(results[0]) - len(shapes)) +
                                   symbol.list_inputs(), results[1], results[0]):
        np.testing.assert_allclose(got, expected, err_msg=name, **TOLERANCE)
    return made


def steps(h, weight, count, **options):
    """`count` products of `weight` (no bias), each reading the last one's tanh; all
    of one name, as a Gluon layer's calls are."""
    for _ in range(count):
        h = mx.sym.tanh(mx.sym.FullyConnected(h, weight, no_bias=True, num_hidden=8,
                                              name="layer_fwd", **options))
    return h


def test_products_after_a_branch_stack_only_where_their_shapes_are_known():
    """MXNet infers no shape after a `_cond` (nor a `_while_loop`): an unknown shape
    (partial inference gives ()) was taken for a known one, and products of one
    layer, all of one node name, shared one shape by name; the rewritten graph then
    failed ("expected [2,8], got []"). Only the three products before the branch
    are steps, those after it keep their per-step gradients."""
    x, w = mx.sym.var("x"), mx.sym.var("w")
    h = steps(x, w, 3)
    # gluon_dyn's cond: MXNet's own (mx.sym.contrib.cond) leaves garbage in the
    # input gradients of this graph, rewritten or not
    h = gluon_dyn.cond(mx.sym.sum(h) > 0, lambda: h * 2, lambda: h * 3)
    made = stacked_alike(steps(h, w, 3), {"x": (2, 8), "w": (8, 8)})
    assert [product.gradients_shape for product in made.products] == [(3, 2, 8)]


def test_products_of_one_weight_in_two_forms_or_shapes_are_stacked_apart():
    """Products of one weight with other attributes (flatten) or output shapes are
    separate stacks: each gets inputs of its own (they had one name, and so one
    input: gradients silently wrong)."""
    x, w = mx.sym.var("x"), mx.sym.var("w")
    symbol = mx.sym.Group([steps(x, w, 3), steps(x * 0.5, w, 3, flatten=False),
                           steps(mx.sym.slice_axis(x, axis=0, begin=0, end=1), w, 2)])
    made = stacked_alike(symbol, {"x": (2, 8), "w": (8, 8)})
    assert sorted(product.gradients_shape for product in made.products) == [
        (2, 1, 8), (3, 2, 8), (3, 2, 8)]
    assert len({product.step_gradients for product in made.products}) == 3


def test_products_of_two_weights_added_to_split_rows():
    """Two recurrent weights, each product added to one step of rows split along
    their first axis (two LSTM or RNN loops): both get their step gradients added
    to the rows (the second's plan read the graph the first had changed: a crash)."""
    shapes, outputs = {}, []
    for name in ("a", "b"):
        rows, weight, bias, h = (mx.sym.var(name + part) for part in ("_rows", "_w", "_b", "_h"))
        shapes.update({name + "_rows": (4, 1, 8), name + "_w": (8, 8), name + "_b": (8,),
                       name + "_h": (1, 8)})
        split = mx.sym.SliceChannel(rows, num_outputs=4, axis=0, squeeze_axis=True)
        for t in range(4):
            h = mx.sym.tanh(mx.sym.FullyConnected(h, weight, bias, num_hidden=8) + split[t])
        outputs.append(h)
    made = stacked_alike(mx.sym.Group(outputs), shapes)
    names = [node["name"] for node in json.loads(made.symbol.tojson())["nodes"]]
    assert [product.weight for product in made.products] == ["a_w", "b_w"]
    assert {"a_w_step_gradients_added", "b_w_step_gradients_added"} <= set(names)


def test_a_product_of_a_product_reads_it_with_its_step_gradient():
    """FC(FC(h)): the outer product reads the inner one as rewritten, so the inner
    one is computed once, without a weight gradient of its own."""
    x, w = mx.sym.var("x"), mx.sym.var("w")
    h = x
    for _ in range(2):
        h = mx.sym.tanh(mx.sym.FullyConnected(
            mx.sym.FullyConnected(h, w, no_bias=True, num_hidden=8), w, no_bias=True,
            num_hidden=8))
    graph = json.loads(stacked_alike(h, {"x": (2, 8), "w": (8, 8)}).symbol.tojson())
    products = [graph["nodes"][index]["name"] for index in reachable(graph)
                if graph["nodes"][index]["op"] == "FullyConnected"]
    assert len(products) == 4 and all(name.endswith("_data_gradient_only") for name in products)


class TwoForms(gluon.HybridBlock):
    """One weight in products of two forms (flatten or not), as a user writes them."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.weight = self.params.get("weight", shape=(8, 8))

    def hybrid_forward(self, F, x, weight):
        h, g = x, x * 0.5
        for _ in range(3):
            h = F.tanh(F.FullyConnected(h, weight, no_bias=True, num_hidden=8)) + h * 0.5
            g = F.tanh(F.FullyConnected(g, weight, no_bias=True, num_hidden=8,
                                        flatten=False)) + g * 0.25
        return h * g


def test_a_block_with_one_weight_in_two_forms_of_products():
    dynamic = agree(TwoForms, (2, 8))
    assert stacked_weights(dynamic) == [dynamic.prefix + "weight"] * 2


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


def test_shapes_of_nodes_of_one_name_are_told_apart():
    """A layer called on 3 rows and on 2 gives two nodes of one name: the stack of
    the first one's first 2 rows is not that whole array (shapes were looked up by
    name, and the 2-row node's shape was taken for the 3-row one's)."""
    a, b, w = mx.sym.var("a"), mx.sym.var("b"), mx.sym.var("w")
    three_rows = mx.sym.FullyConnected(a, w, no_bias=True, num_hidden=3, name="fc")
    two_rows = mx.sym.FullyConnected(b, w, no_bias=True, num_hidden=3, name="fc")
    rows = [mx.sym.reshape(mx.sym.slice_axis(three_rows, axis=0, begin=t, end=t + 1), (-3, -2))
            for t in range(2)]
    symbol = mx.sym.Group([mx.sym.stack(*rows) * 3, two_rows])
    shapes = {"a": (3, 4), "b": (2, 4), "w": (3, 4)}
    rewritten = equivalent_ops.rewritten(symbol, dict.fromkeys(shapes, np.float32), shapes)
    assert reachable_ops(rewritten).count("slice_axis") == 1     # the first 2 rows, at once
    assert_computes_alike(rewritten, symbol, shapes)


def test_shapes_of_node_outputs_after_hidden_outputs():
    """Dropout and BatchNorm have outputs the graph does not show (a mask, the batch
    statistics): the shapes of later nodes' outputs are still their own."""
    x, w = mx.sym.var("x"), mx.sym.var("w")
    normed = mx.sym.BatchNorm(mx.sym.Dropout(x, p=0.5), name="bn")
    symbol = mx.sym.Group([steps(normed, w, 2), mx.sym.sum(normed, axis=1)])
    shapes = graph_json.output_shapes(symbol, {"x": (2, 8), "w": (8, 8)})
    nodes = json.loads(symbol.tojson())["nodes"]
    found = sorted((nodes[index]["op"], output, shape) for (index, output), shape in
                   shapes.items() if nodes[index]["op"] != "null")
    assert found == sorted([("Dropout", 0, (2, 8)), ("BatchNorm", 0, (2, 8)), ("sum", 0, (2,))] +
                           [("FullyConnected", 0, (2, 8)), ("tanh", 0, (2, 8))] * 2)


def assert_computes_alike(rewritten, symbol, shapes):
    """Both graphs give outputs of the same shapes and values on random inputs."""
    inputs = {name: data(shape, seed) for seed, (name, shape) in enumerate(shapes.items())}
    for got, expected in zip(rewritten.eval(**inputs), symbol.eval(**inputs)):
        assert got.shape == expected.shape
        np.testing.assert_allclose(got.asnumpy(), expected.asnumpy(), rtol=1e-6, atol=1e-6)


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
