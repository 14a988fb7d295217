"""Per-row projections made one (gluon_dyn/hybridize/passes/row_projections.py): a Python
loop over a sequence's rows into a cell whose input product is the same for every
row runs one product over the whole sequence. Each model runs imperatively and
through hybridize(dynamic=True) on the same parameters; outputs, the input's
gradient and every parameter's gradient must agree, on calls served by a graph,
and the test says whether the graph MXNet ran has the rows' product made one."""
import json

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

from gluon_dyn.hybridize.passes import row_projections
from gluon_dyn.hybridize.call.dynamic import report, runner_of
from test_planned_backward import twin_blocks

TOLERANCE = dict(rtol=1e-5, atol=1e-5)
# Subclasses of Gluon's cells: the same operators, but recorded runs do not run them
# as MXNet's RNN operator (fused_cells.py), so their graphs keep the products these
# tests count (and their repeated products are stacked: stacked_weight_gradients.py).
CELLS = {kind: type("Own" + cell.__name__, (cell,), {}) for kind, cell in
         (("rnn", gluon.rnn.RNNCell), ("gru", gluon.rnn.GRUCell), ("lstm", gluon.rnn.LSTMCell))}


class Loop(gluon.Block):
    """A cell over the rows of `seq` (rows `rows(T)`), a Dense head on the last output."""

    def __init__(self, cell="lstm", rows=range, embed=False):
        super().__init__()
        self.rows, self.embedded = rows, embed
        with self.name_scope():
            self.embed = gluon.nn.Dense(3, in_units=3, flatten=False) if embed else None
            self.cell = CELLS[cell](5, input_size=3)
            self.head = gluon.nn.Dense(1, in_units=5)

    def forward(self, seq):
        if self.embedded:
            seq = self.embed(seq)
        state = self.cell.begin_state(batch_size=seq.shape[1])
        for t in self.rows(seq.shape[0]):
            out, state = self.cell(seq[t], state)
        return self.head(out)


class TwoCells(gluon.Block):
    """Two cells reading the same rows (one forward, one backward in time)."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.forward_cell = CELLS["rnn"](4, input_size=3)
            self.backward_cell = CELLS["rnn"](4, input_size=3)

    def forward(self, seq):
        ahead = behind = mx.nd.zeros((seq.shape[1], 4))
        for t in range(seq.shape[0]):
            ahead, _ = self.forward_cell(seq[t], [ahead])
            behind, _ = self.backward_cell(seq[seq.shape[0] - 1 - t], [behind])
        return ahead * behind


def run(block, seq, input_gradient=True):
    """(output, the input's gradient or None, {parameter: gradient}) of a recorded call."""
    seq = seq.copy()
    if input_gradient:
        seq.attach_grad()
    with autograd.record():
        out = block(seq)
        loss = (out * out).sum()
    loss.backward()
    grads = {name.split("_", 1)[1]: p.grad().asnumpy()
             for name, p in block.collect_params().items()}
    return out.asnumpy(), seq.grad.asnumpy() if input_gradient else None, grads


def agree(make, shape, calls=4):
    """Runs both blocks on `calls` sequences (recorded, then inference); returns the
    dynamic block's graphs as MXNet ran them (JSON), one for training and one for
    inference."""
    imperative, dynamic = twin_blocks(make)
    for call in range(calls):
        seq = mx.nd.array(np.random.RandomState(call).standard_normal(shape))
        expected, got = run(imperative, seq), run(dynamic, seq)
        np.testing.assert_allclose(got[0], expected[0], **TOLERANCE)
        np.testing.assert_allclose(got[1], expected[1], **TOLERANCE)
        for name in expected[2]:
            np.testing.assert_allclose(got[2][name], expected[2][name], err_msg=name,
                                       **TOLERANCE)
        np.testing.assert_allclose(dynamic(seq).asnumpy(), imperative(seq).asnumpy(),
                                   **TOLERANCE)
    by_kind = report(dynamic)["calls"]["by_kind"]
    assert by_kind["graph"] >= 2 * calls - 2 and by_kind["fallback"] == 0, by_kind
    graphs = ran_graphs(dynamic)
    assert len(graphs) == 2
    return graphs


def reachable(graph):
    """Indices of the nodes the graph's outputs depend on."""
    seen, stack = set(), [head[0] for head in graph["heads"]]
    while stack:
        index = stack.pop()
        if index not in seen:
            seen.add(index)
            stack.extend(entry[0] for entry in graph["nodes"][index]["inputs"])
    return seen


def ran_graphs(block):
    """The graphs MXNet ran for the block (JSON): recorded and inference."""
    return [json.loads((executor.mxnet_graph if executor.recording_graph is None
                        else executor.recording_graph).tojson())
            for executor in runner_of(block).cache.values()]


def products(graph):
    """Names of the FullyConnected nodes the graph's outputs depend on."""
    return [graph["nodes"][i]["name"] for i in reachable(graph)
            if graph["nodes"][i]["op"] == "FullyConnected"]


def batched_products(graphs):
    """Per graph, how many products of a whole sequence it runs."""
    return [sum(name.endswith("_all_rows") for name in products(graph)) for graph in graphs]


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_a_loop_over_rows_runs_one_input_product_and_matches_imperative(cell):
    graphs = agree(lambda: Loop(cell), (9, 2, 3))
    # one input product for the 9 rows, 9 recurrent products, the head
    assert [len(products(graph)) for graph in graphs] == [1 + 9 + 1] * 2
    assert batched_products(graphs) == [1, 1]


def test_rows_computed_inside_the_graph_and_read_backwards():
    graphs = agree(lambda: Loop(embed=True, rows=lambda n: reversed(range(n))), (7, 2, 3))
    assert batched_products(graphs) == [1, 1]


def test_two_cells_over_the_same_rows_each_get_their_product():
    assert batched_products(agree(TwoCells, (6, 3, 3))) == [2, 2]


class LanguageModel(gluon.Block):
    """examples/train/lstm_lm.py's loop: each step embeds its tokens, then the cell."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.embed = gluon.nn.Embedding(7, 3)
            self.cell = CELLS["lstm"](5, input_size=3)

    def forward(self, tokens):
        state = self.cell.begin_state(batch_size=tokens.shape[1])
        outputs = []
        for t in range(tokens.shape[0]):
            out, state = self.cell(self.embed(tokens[t]), state)
            outputs.append(out)
        return mx.nd.stack(*outputs)


def test_rows_embedded_before_their_product_are_embedded_at_once():
    imperative, dynamic = twin_blocks(LanguageModel)
    for call in range(4):
        tokens = mx.nd.array(np.random.RandomState(call).randint(0, 7, (8, 3)))
        # (token ids have no gradient: Embedding gives none)
        expected, got = run(imperative, tokens, False), run(dynamic, tokens, False)
        np.testing.assert_allclose(got[0], expected[0], **TOLERANCE)
        for name in expected[2]:
            np.testing.assert_allclose(got[2][name], expected[2][name], err_msg=name,
                                       **TOLERANCE)
    graphs = ran_graphs(dynamic)
    assert batched_products(graphs) == [1]
    assert report(dynamic)["calls"]["by_kind"]["graph"] == 3   # all but the 1 profiled


def test_a_loop_over_few_of_the_rows_keeps_its_per_row_products():
    # 3 rows of 10: projecting all 10 would cost more than it saves
    assert batched_products(agree(lambda: Loop(rows=lambda n: range(0, n, 4)), (10, 2, 3))) \
        == [0, 0]


def test_a_sequence_of_rank_two_keeps_its_per_row_products():
    class Flat(Loop):
        def forward(self, seq):      # rows of (T, features): each row a 1-d array
            state = self.cell.begin_state(batch_size=1)
            for t in range(seq.shape[0]):
                out, state = self.cell(seq[t].reshape((1, -1)), state)
            return self.head(out)
    assert batched_products(agree(Flat, (5, 3))) == [0, 0]


def test_a_graph_without_shapes_for_its_rows_is_left_as_it_is():
    seq = mx.sym.var("seq")
    weight, bias = mx.sym.var("w"), mx.sym.var("b")
    steps = [mx.sym.FullyConnected(mx.sym.reshape(mx.sym.slice_axis(seq, axis=0, begin=t,
                                                                    end=t + 1), (-3, -2)),
                                   weight, bias, num_hidden=4) for t in range(3)]
    symbol = mx.sym.Group(steps)
    assert row_projections.batched(symbol, {}) is symbol
    rewritten = row_projections.batched(symbol, {"seq": (3, 2, 5)})
    assert rewritten.list_inputs() == symbol.list_inputs()
    arrays = {"seq": mx.nd.random.normal(shape=(3, 2, 5)), "w": mx.nd.random.normal(shape=(4, 5)),
              "b": mx.nd.random.normal(shape=(4,))}
    for got, expected in zip(rewritten.eval(**arrays), symbol.eval(**arrays)):
        np.testing.assert_allclose(got.asnumpy(), expected.asnumpy(), **TOLERANCE)
