"""Python values among a forward's arguments: a module passed as `F` (`net(mx.nd, x)`,
MXNet's own examples), functions, methods, classes and callable objects key the
graph by identity (or by their attributes); NumPy arrays are graph inputs the code
converts (`nd.array(x)`); the context of the argument arrays keys the graph."""
import mxnet as mx
import numpy as np
from mxnet import gluon, nd

import gluon_dyn  # noqa: F401
from idiom_twins import on_graphs, python_reasons, same_as_written

RNG = np.random.RandomState(13)


def array(*shape):
    return nd.array(RNG.randn(*shape))


class TakesF(gluon.Block):
    """MXNet's example style: the forward takes `F` and calls `F.op(...)`."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(3, in_units=4)

    def forward(self, F, x, activation):
        h = F.expand_dims(self.dense(x), axis=0)
        return activation(F.add(h, F.abs(h)))


class Scaled:
    """A callable object: its attributes key the graph."""

    def __init__(self, scale):
        self.scale = scale

    def __call__(self, x):
        return x * self.scale


def test_modules_functions_and_callables_as_arguments():
    scaled = Scaled(2.0)
    calls = [(mx.nd, array(2, 4), nd.relu)] * 3 + [(mx.nd, array(2, 4), nd.relu),
                                                    (mx.nd, array(2, 4), nd.sigmoid),
                                                    (mx.nd, array(2, 4), scaled),
                                                    (mx.nd, array(2, 4), scaled)]
    report = same_as_written(TakesF, calls, train=True)
    on_graphs(report, 4)
    assert report["cached_graphs"] == 3
    scaled.scale = 3.0   # another value: another graph, not the one traced with 2.0
    imperative, dynamic = [TakesF() for _ in range(2)]
    for block in (imperative, dynamic):
        mx.random.seed(0)
        block.initialize()
    dynamic.hybridize(dynamic=True)
    x = array(2, 4)
    for _ in range(4):
        np.testing.assert_allclose(dynamic(mx.nd, x, scaled).asnumpy(),
                                   imperative(mx.nd, x, scaled).asnumpy(), rtol=1e-5)
        scaled.scale += 1


class Converts(gluon.Block):
    """NumPy arrays given to the forward, converted by it (`nd.array`, item
    assignment); their shape and dtype read."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.embed = gluon.nn.Embedding(10, 4)

    def forward(self, tokens, weights):
        if isinstance(tokens, np.ndarray):
            tokens = nd.array(tokens, dtype="int32")
        scale = nd.zeros((weights.shape[0], 1))
        scale[:, 0] = weights
        return self.embed(tokens) * nd.array(weights).reshape((-1, 1)) + scale


def test_numpy_arrays_are_graph_inputs():
    calls = [(RNG.randint(0, 10, size=5), RNG.rand(5).astype("float64")) for _ in range(6)]
    report = same_as_written(Converts, calls, train=True)
    on_graphs(report, 3)
    assert report["cached_graphs"] == 1   # their values are not the key


class ReadsNumpy(gluon.Block):
    def forward(self, x, lengths):
        total = int(lengths.sum())    # NumPy, in Python
        return x[:total] * 2


def test_numpy_read_in_python_runs_as_python():
    calls = [(array(6, 2), np.array([1, 2])), (array(6, 2), np.array([2, 3]))] * 3
    report = same_as_written(ReadsNumpy, calls)
    assert any("reads the values of a NumPy array argument in Python" in reason
               for reason in python_reasons(report)), report


class ByContext(gluon.Block):
    def forward(self, x):
        zeros = nd.zeros(x.shape, ctx=x.context)
        return x + zeros + x.context.device_id


def test_the_context_of_the_arguments_keys_the_graph():
    calls = [(array(2, 2).as_in_context(mx.cpu(device)),) for device in (0, 0, 0, 1, 1, 0)]
    report = same_as_written(ByContext, calls)
    assert report["cached_graphs"] == 2 and report["calls"]["graph"] == 3, report["calls"]
