"""Arrays unpacked where Python unpacks them, in code written for NDArrays: `a, b = x`,
`first, *rest = x`, `nd.concat(a, *tags, dim=0)` (lstm_crf's, with `tags` an array),
`[*x]`, loop targets `for a, b in x`; their rows, as NDArrays unpack, in a graph.
A Symbol of several outputs (`nd.split`, which gives a list) unpacks into them; a
HybridBlock's code unpacks as it does run imperatively (rows)."""
import numpy as np
from mxnet import gluon, nd

import gluon_dyn  # noqa: F401
from idiom_twins import on_graphs, same_as_written

RNG = np.random.RandomState(17)


class Unpacks(gluon.Block):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(3, in_units=3)

    def forward(self, x, tags):
        first, second, third = x
        head, *rest = self.dense(x)
        joined = nd.concat(nd.array([9]), *tags, dim=0)
        listed = [*x, first]
        pairs = 0
        for a, b in x.reshape((3, 1, 3)).broadcast_to((3, 2, 3)):
            pairs = pairs + a * b
        low, high = nd.split(x, 2, axis=0) if x.shape[0] % 2 == 0 else (x, x)
        return first + second * third, head, rest, joined, nd.stack(*listed), pairs, low, high


def test_arrays_unpack_into_their_rows_in_a_graph():
    calls = [(nd.array(RNG.randn(3, 3)), nd.array(RNG.randint(0, 5, size=4)))
             for _ in range(6)]
    on_graphs(same_as_written(Unpacks, calls, train=True), 3)


class SplitsInHybridCode(gluon.HybridBlock):
    """Code written for `F`: a split's outputs unpack as the list nd.split gives."""

    def hybrid_forward(self, F, x):
        a, b = F.split(x, 2, axis=1)
        return a * b


def test_outputs_of_a_split_unpack_in_code_written_for_symbols():
    calls = [(nd.array(RNG.randn(2, 4)),) for _ in range(6)]
    on_graphs(same_as_written(SplitsInHybridCode, calls), 3)


class UnpacksInHybridCode(gluon.HybridBlock):
    """Code written for `F`, run as written on NDArrays, unpacks their rows: so does
    its graph."""

    def hybrid_forward(self, F, x):
        first, *rest = x
        return F.broadcast_add(F.stack(*rest), first.reshape((1, -1)))


def test_arrays_unpack_into_their_rows_in_code_written_for_symbols():
    calls = [(nd.array(RNG.randn(3, 4)),) for _ in range(6)]
    on_graphs(same_as_written(UnpacksInHybridCode, calls, train=True), 3)
