"""The lists, dicts, tuples and objects a forward is given: what it does to them, graphs do too.

Imperatively a forward that assigns into a list it was given (`states[layer] =
new_state`, GluonNLP's BiLMEncoder) changes the caller's list, and what it returns
may be that very list. Graphs replay those changes after each run (argument_writes.py)
and return the caller's own containers.
"""
import collections
import warnings

import mxnet as mx
import pytest
from gluonnlp.model import BiLMEncoder
from mxnet import gluon

import gluon_dyn
from dynamic_twins import assert_same, calls_on_graphs, twins


def test_bilm_encoder_states_assigned_into_the_callers_lists():
    """GluonNLP 0.10's BiLMEncoder with LSTMPCellWithClip, as installed: the state
    lists it returns are the caller's, updated in place, on every batch size."""
    def make():
        return BiLMEncoder(mode="lstmpc", num_layers=2, input_size=8, hidden_size=16,
                           proj_size=8, cell_clip=3, proj_clip=3)
    imperative, dynamic = twins(make, init=mx.init.Xavier(), check_speed=False)
    batches = [4, 8, 4, 8, 8, 4, 8]
    for call, batch in enumerate(batches):
        x = mx.nd.random.normal(shape=(5, batch, 8))
        given = [block.begin_state(mx.nd.zeros, batch_size=batch)
                 for block in (imperative, dynamic)]
        (out_i, states_i), (out_d, states_d) = [block(x, states)
                                                for block, states in zip((imperative, dynamic),
                                                                         given)]
        assert_same(out_d, out_i, "output of call %d" % call)
        assert_same(states_d, states_i, "states returned by call %d" % call)
        assert_same(given[1], given[0], "the caller's states after call %d" % call)
        # As written, the forward returns the very lists it was given.
        assert states_d[0] is given[1][0] and states_d[1] is given[1][1]
    assert calls_on_graphs(dynamic) == len(batches) - 3     # all but the profiled


class Bookkeeper(gluon.Block):
    """A forward that changes what it is given in every way Python allows."""

    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(4, in_units=4)

    def forward(self, x, state, log, cache, node):
        h, c = state                     # a tuple of arrays
        h = mx.nd.tanh(self.dense(x) + h)
        log.append(h.sum())              # appended to the caller's list
        del log[0]                       # and its oldest entry dropped
        cache["h"] = h                   # a dict item replaced
        cache.pop("stale", None)         # and one removed
        node.visits += 1                 # an object's attributes
        node.h = h * node.visits
        return h, (h, c + 1), log


class Node:
    def __init__(self, visits):
        self.visits = visits


def test_changes_to_lists_dicts_and_objects_are_replayed():
    imperative, dynamic = twins(Bookkeeper, check_speed=False)
    for call in range(7):
        x = mx.nd.random.normal(shape=(2, 4))
        given = []
        for _ in range(2):
            state = (mx.nd.ones((2, 4)), mx.nd.ones((2, 4)) * call)
            given.append((state, [mx.nd.array([call]), mx.nd.array([-call])],
                          {"h": None, "stale": 1}, Node(call)))
        outs = [block(x, *arguments) for block, arguments in zip((imperative, dynamic), given)]
        assert_same(outs[1], outs[0], "output of call %d" % call)
        (_, log_i, cache_i, node_i), (_, log_d, cache_d, node_d) = given
        assert_same(log_d, log_i, "the log after call %d" % call)
        assert_same(cache_d, cache_i, "the cache after call %d" % call)
        assert_same(vars(node_d), vars(node_i), "the node after call %d" % call)
        assert outs[1][2] is log_d     # the caller's own list, returned
    assert calls_on_graphs(dynamic) == 4


class AppendsUnderABranch(gluon.Block):
    """An append to the caller's list under a branch on a tensor: after a graph run the
    list holds the array where the branch was taken, nothing where it was not (the
    append's presence flag decides; the output of the `acc.append(v1)` of a split
    forward's part, found by the fuzzer)."""

    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(4, in_units=4)

    def forward(self, x, log):
        h = self.dense(x)
        if h.sum() > 0:
            log.append(h * 2)
        return h


def test_an_append_under_a_tensor_branch_reaches_the_callers_list():
    imperative, dynamic = twins(AppendsUnderABranch, check_speed=False)
    for call in range(8):
        x = mx.nd.random.normal(shape=(2, 4)) * (1 if call % 3 else -1)
        logs = [[mx.nd.ones((1,))], [mx.nd.ones((1,))]]
        outs = [block(x, log) for block, log in zip((imperative, dynamic), logs)]
        assert_same(outs[1], outs[0], "output of call %d" % call)
        assert len(logs[1]) == len(logs[0]), "call %d" % call
        assert_same(logs[1], logs[0], "the log after call %d" % call)
    assert calls_on_graphs(dynamic) == 5


class KeepsSymbols(gluon.Block):
    """Stores into a list it is given a value no graph output can describe."""

    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(2, in_units=2)

    def forward(self, x, sink):
        h = self.dense(x)
        sink.append(lambda: h)
        return h


def test_a_change_no_graph_can_replay_runs_as_python_and_leaves_no_symbol():
    imperative, dynamic = twins(KeepsSymbols, check_speed=False)
    for _ in range(5):
        x = mx.nd.ones((1, 2))
        sinks = [[], []]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outs = [block(x, sink) for block, sink in zip((imperative, dynamic), sinks)]
        assert_same(outs[1], outs[0])
        assert len(sinks[1]) == 1 and isinstance(sinks[1][0](), mx.nd.NDArray)
    assert "function" in gluon_dyn.hybridize.report(dynamic)["fallback"]


@pytest.mark.parametrize("state", ["tuple", "namedtuple", "nested"])
def test_arrays_inside_tuples_are_graph_inputs(state):
    Pair = collections.namedtuple("Pair", "h c")

    class Cell(gluon.Block):
        def __init__(self):
            super().__init__()
            self.dense = gluon.nn.Dense(3, in_units=3)

        def forward(self, x, pair):
            h, c = pair if state != "nested" else pair[0]
            h = self.dense(x) + h * c
            return h, (Pair(h, c) if state == "namedtuple" else (h, c))

    def arguments(call):
        h, c = mx.nd.ones((2, 3)) * call, mx.nd.ones((2, 3)) * 0.5
        pair = Pair(h, c) if state == "namedtuple" else (h, c)
        return mx.nd.random.normal(shape=(2, 3)), ((pair, 1) if state == "nested" else pair)

    imperative, dynamic = twins(Cell, check_speed=False)
    for call in range(6):
        args = arguments(call)
        assert_same(dynamic(*args), imperative(*args), "call %d" % call)
    assert calls_on_graphs(dynamic) == 3


class TypeChecks(gluon.Block):
    """Code written for NDArrays asks what its values are, as tree models do."""

    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(3, in_units=3)

    def forward(self, node):
        if isinstance(node, mx.nd.NDArray):
            return self.dense(node)
        if isinstance(node, (list, tuple)) and not isinstance(node[0], mx.sym.Symbol):
            return self.forward(node[0]) * self.forward(node[1])
        raise TypeError("not a tree")


def test_traced_values_are_arrays_to_isinstance():
    imperative, dynamic = twins(TypeChecks, check_speed=False)
    leaf = mx.nd.ones((1, 3))
    for call in range(5):
        tree = ((leaf * call, leaf), leaf + call)
        assert_same(dynamic(tree), imperative(tree), "call %d" % call)
    report = gluon_dyn.hybridize.report(dynamic)
    assert not report["internal_errors"] and report["calls"]["graph"] == 2


class AssignsIntoStates(gluon.Block):
    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(3, in_units=3)

    def forward(self, x, states):
        states[0] = self.dense(x) + states[0]
        return states[0]


def test_export_refuses_a_forward_that_changes_what_it_is_given(tmp_path):
    block = AssignsIntoStates()
    block.initialize()
    block.hybridize(dynamic=True, check_speed=False)
    block(mx.nd.ones((1, 3)), [mx.nd.ones((1, 3))])
    with pytest.raises(gluon_dyn.ExportError, match="changes a list, dict or object it is given"):
        block.export(str(tmp_path / "model"))
