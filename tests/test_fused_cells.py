"""Loops over Gluon's RNN, GRU and LSTM cells run as MXNet's fused RNN operator when
recorded (gluon_dyn/hybridize/passes/fused_cells.py), and for inference where that form
measures faster than the unrolled one (graph_choice.py).

Each model runs imperatively and through hybridize(dynamic=True) on the same
parameters; outputs, the input's gradient and every parameter's gradient agree on
calls served by a graph, and each test says whether the recorded graph ran the
loop as one RNN operator (no per-step products left) or unrolled."""
import json

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon

from gluon_dyn.hybridize.passes import fused_cells
from gluon_dyn.hybridize.timing import graph_choice
from gluon_dyn.hybridize.call.dynamic import report, runner_of
from test_planned_backward import twin_blocks
from test_row_projections import CELLS as OWN_CELLS
from test_row_projections import products
from test_stacked_weight_gradients import TOLERANCE, Loop, agree, data, recorded_graph

CELLS = {"rnn": lambda: gluon.rnn.RNNCell(6, input_size=3),
         "relu": lambda: gluon.rnn.RNNCell(6, activation="relu", input_size=3),
         "gru": lambda: gluon.rnn.GRUCell(6, input_size=3),
         "lstm": lambda: gluon.rnn.LSTMCell(6, input_size=3)}


class Sequence(gluon.Block):
    """`cell` over the rows of `seq` (in `order`), outputs stacked, plus the last
    states (an LSTM's cell state among them)."""

    def __init__(self, cell, order=range):
        super().__init__()
        self.order = order
        with self.name_scope():
            self.cell = cell()

    def forward(self, seq):
        states = self.cell.begin_state(batch_size=seq.shape[1])
        outputs = []
        for t in self.order(seq.shape[0]):
            out, states = self.cell(seq[t], states)
            outputs.append(out)
        return mx.nd.stack(*outputs) + mx.nd.sum(states[-1])


def fused_prefixes(block):
    return sorted(prefix for graph in report(block)["recorded_graphs"]
                  for prefix in graph["fused_cells"])


def recorded_ops(block):
    return [node["op"] for node in recorded_graph(block)["nodes"]]


@pytest.mark.parametrize("kind", sorted(CELLS))
def test_a_loop_over_a_cell_runs_as_one_rnn_operator_and_matches_imperative(kind):
    # a ReLU RNN's values grow with the steps (gradients of 1e4 after 9): fewer steps
    dynamic = agree(lambda: Sequence(CELLS[kind]), (5 if kind == "relu" else 9, 2, 3))
    assert fused_prefixes(dynamic) == [dynamic.cell.prefix]
    graph = recorded_graph(dynamic)
    assert [node["op"] for node in graph["nodes"]].count("RNN") == 1
    assert products(graph) == []
    # inference has both forms: the unrolled graph keeps its per-step products
    inference = [json.loads(executor.mxnet_graph.tojson())
                 for executor in runner_of(dynamic).cache.values()
                 if executor.mxnet_graph is not None]
    assert len(inference) == 1 and products(inference[0])
    [forms] = report(dynamic)["inference_graphs"]
    assert forms["forms"] == ["unrolled", "cells fused"]


def scripted_samples(ms):
    """An interleaved_samples for graph_choice running each form once and timing
    it `ms` ({form: milliseconds})."""
    def sample(variants, repeats):
        for run in variants.values():
            run()
        return {name: [ms[name] / 1000] * repeats for name in variants}
    return sample


def inference_calls(make, shape, calls):
    """Imperative and dynamic twins of `make` on `calls` sequences, not recorded;
    outputs agree; returns the dynamic block."""
    imperative, dynamic = twin_blocks(make)
    for call in range(calls):
        seq = data(shape, call)
        np.testing.assert_allclose(dynamic(seq).asnumpy(), imperative(seq).asnumpy(),
                                   **TOLERANCE)
    by_kind = report(dynamic)["calls"]["by_kind"]
    assert by_kind["graph"] == calls - 1 and by_kind["fallback"] == 0, by_kind
    return dynamic


@pytest.mark.parametrize("faster", ["cells fused", "unrolled"])
def test_inference_runs_the_form_measured_faster(monkeypatch, faster):
    slower = {"cells fused": "unrolled", "unrolled": "cells fused"}[faster]
    monkeypatch.setattr(graph_choice, "interleaved_samples",
                        scripted_samples({faster: 1.0, slower: 2.0}))
    dynamic = inference_calls(lambda: Sequence(CELLS["lstm"]), (7, 2, 3), calls=5)
    [forms] = report(dynamic)["inference_graphs"]
    assert forms["chosen"] == faster and forms["calls"] == 4, forms
    [executor] = runner_of(dynamic).cache.values()
    ops = [node["op"] for node in json.loads(executor.inference_graph().tojson())["nodes"]]
    assert ("RNN" in ops) == (faster == "cells fused")


def test_inference_keeps_the_unrolled_form_against_a_fused_one_within_the_margin(monkeypatch):
    monkeypatch.setattr(graph_choice, "interleaved_samples",
                        scripted_samples({"cells fused": 0.98, "unrolled": 1.0}))
    dynamic = inference_calls(lambda: Sequence(CELLS["gru"]), (6, 2, 3), calls=3)
    assert report(dynamic)["inference_graphs"][0]["chosen"] == "unrolled"


def test_a_tvm_plan_is_measured_against_the_form_mxnet_serves(monkeypatch, tmp_path):
    """Under backend="tvm" the plan's alternative is the fused form MXNet measured
    faster: where it serves (as when it measures faster than the plan), the RNN runs."""
    monkeypatch.setattr(graph_choice, "interleaved_samples",
                        scripted_samples({"cells fused": 1.0, "unrolled": 2.0}))
    imperative, dynamic = twin_blocks(lambda: Sequence(CELLS["gru"]))
    dynamic.hybridize(dynamic=True, profile_calls=1, backend="tvm", backend_options={
        "choose_by_measurement": False, "cache_dir": str(tmp_path)})
    def agree_on(seq):
        np.testing.assert_allclose(dynamic(seq).asnumpy(), imperative(seq).asnumpy(),
                                   **TOLERANCE)
    for call in range(3):   # profiled; MXNet, then the plan is built; the plan
        agree_on(data((4, 2, 3), call))
    [executor] = runner_of(dynamic).cache.values()
    [plan] = executor.tvm_plans.values()
    plan.uses_whole_graph = True
    agree_on(data((4, 2, 3), 3))
    assert plan.calls == {"plan": 1, "whole graph": 1}
    assert "RNN" in [node["op"] for node in json.loads(plan.whole_symbol.tojson())["nodes"]]


def test_a_loop_over_a_cell_subclass_has_one_inference_form():
    dynamic = inference_calls(lambda: Loop("lstm"), (6, 2, 3), calls=3)
    assert report(dynamic)["inference_graphs"] == []


def test_rows_read_backwards():
    dynamic = agree(lambda: Sequence(CELLS["lstm"], lambda n: reversed(range(n))), (7, 2, 3))
    assert fused_prefixes(dynamic) == [dynamic.cell.prefix]


class Autoregressive(gluon.Block):
    """Each step's input is the previous output: the operator cannot run it."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = gluon.rnn.GRUCell(3, input_size=3)

    def forward(self, x):
        states = self.cell.begin_state(batch_size=x.shape[0])
        outputs = []
        for _ in range(5):
            x, states = self.cell(x, states)
            outputs.append(x)
        return mx.nd.stack(*outputs)


def test_outputs_fed_back_as_inputs_stay_unrolled():
    dynamic = agree(Autoregressive, (2, 3))
    assert fused_prefixes(dynamic) == [] and "RNN" not in recorded_ops(dynamic)


class CellStates(gluon.Block):
    """An LSTM whose every cell state is read: the operator gives the last only."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = gluon.rnn.LSTMCell(6, input_size=3)

    def forward(self, seq):
        states = self.cell.begin_state(batch_size=seq.shape[1])
        total = 0
        for t in range(seq.shape[0]):
            _, states = self.cell(seq[t], states)
            total = total + states[1]
        return total


def test_a_cell_state_read_between_steps_stays_unrolled():
    dynamic = agree(CellStates, (5, 2, 3))
    assert fused_prefixes(dynamic) == [] and "RNN" not in recorded_ops(dynamic)


def test_a_cell_subclass_stays_unrolled():
    dynamic = agree(lambda: Loop("lstm"), (6, 2, 3))
    assert isinstance(dynamic.cell, OWN_CELLS["lstm"])
    assert fused_prefixes(dynamic) == [] and "RNN" not in recorded_ops(dynamic)


def test_only_the_cells_the_operator_computes_are_found():
    block = gluon.nn.Sequential()
    with block.name_scope():
        block.add(gluon.rnn.LSTMCell(4, input_size=2),
                  gluon.rnn.LSTMCell(4, input_size=2, activation="relu"),
                  gluon.rnn.RNNCell(4, activation="softsign", input_size=2),
                  OWN_CELLS["gru"](4, input_size=2))
    found = fused_cells.cells_of(block)
    assert [(cell, mode) for cell, mode in found.values()] == [(block[0], "lstm")]


class TwoSequences(gluon.Block):
    """One cell over two sequences one after the other: two chains."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = gluon.rnn.RNNCell(6, input_size=3)

    def forward(self, seq):
        outputs = []
        for half in (seq[:3], seq[3:]):
            states = self.cell.begin_state(batch_size=seq.shape[1])
            for t in range(half.shape[0]):
                out, states = self.cell(half[t], states)
            outputs.append(out)
        return outputs[0] * outputs[1]


def test_a_cell_run_over_two_sequences_stays_unrolled():
    dynamic = agree(TwoSequences, (6, 2, 3))
    assert fused_prefixes(dynamic) == [] and "RNN" not in recorded_ops(dynamic)
