"""Numbers read from tensors that only index arrays and lists stay in the graph
(host_values.py): indices an argmax chose need no guard, indices read from the data
are guarded, and out of range they raise IndexError as Python does."""
import mxnet as mx
import numpy as np
from mxnet import gluon, nd

from gluon_dyn.hybridize.call.dynamic import runner_of
from idiom_twins import on_graphs, same_as_written

RNG = np.random.RandomState(11)
TAGS = 5


def guards_of(report_block):
    return [guard for executor in runner_of(report_block).cache.values()
            for guard in executor.capture.guards]


class ArgmaxDecoder(gluon.Block):
    """A CRF's Viterbi decoding as MXNet's example writes it: the best previous tag
    read with `int(argmax(...).asscalar())`, indexing an array and a list of such
    numbers."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.transitions = self.params.get("transitions", shape=(TAGS, TAGS))

    def forward(self, feats):
        transitions = self.transitions.data()
        vvars = nd.full((1, TAGS), -10.0)
        vvars[0, 0] = 0
        backpointers = []
        for feat in feats:
            pointers, scores = [], []
            for tag in range(TAGS):
                candidates = vvars + transitions[tag]
                best = int(nd.argmax(candidates, axis=1).asscalar())
                pointers.append(best)
                scores.append(candidates[0, best])
            vvars = (nd.concat(*scores, dim=0) + feat).reshape((1, -1))
            backpointers.append(pointers)
        best = int(nd.argmax(vvars, axis=1).asscalar())
        score, path = vvars[0, best], [best]
        for pointers in reversed(backpointers):
            best = pointers[best]
            path.append(best)
        return score, path[::-1]


def decoder_calls(count=5):
    return [(nd.array(RNG.randn(4, TAGS)),) for _ in range(count)]


def test_indices_an_argmax_chose_index_without_guards():
    made = {}

    def make():
        made["block"] = ArgmaxDecoder()
        return made["block"]
    for train in (False, True):
        report = same_as_written(make, decoder_calls(), train=train, speculate=False)
        on_graphs(report, 5)
        assert guards_of(made["block"]) == []


class DataIndexed(gluon.Block):
    """An index read from an input array: a token id, a position."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(4, in_units=4)

    def forward(self, x, position):
        at = int(position.asscalar())
        return self.dense(x)[0, at] * 2 + x[0, at]


def test_indices_read_from_the_data_are_guarded_and_raise_out_of_range_as_python():
    made = {}

    def make():
        made["block"] = DataIndexed()
        return made["block"]
    positions = [3, -1, -4, 0, 4, -5, 2]     # 4 and -5 are out of range for 4 elements
    calls = [(nd.array(RNG.randn(1, 4)), nd.array([position])) for position in positions]
    for train in (False, True):
        report = same_as_written(make, calls, train=train, speculate=False)
        on_graphs(report, 5)
        assert report["calls"]["by_kind"]["guard_failed"] == 2, report["calls"]
        failures = " ".join(failure["why"] if isinstance(failure, dict) else str(failure)
                            for failure in report["guard_failures"])
        assert "out of range" in failures, report["guard_failures"]
        assert guards_of(made["block"]), "no guard on an index read from the data"


def test_a_guarded_index_gives_the_same_gradients_at_negative_positions():
    calls = [(nd.array(RNG.randn(1, 4)), nd.array([position])) for position in (-1, -2, -3, -4)]
    on_graphs(same_as_written(DataIndexed, calls, train=True, speculate=False), 4)
    mx.nd.waitall()
