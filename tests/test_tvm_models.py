"""Whole models, written as Gluon HybridBlocks, converted from their hybridized graphs."""
import mxnet as mx
import numpy as np
from mxnet import gluon

from tvm_helpers import check_hybrid_block

HIDDEN = 64
STEPS = 4
FEATURES = 16


def sequence_batch(size, seed=0):
    """(steps, batch, features) inputs and zero initial states."""
    rng = np.random.RandomState(seed + size)
    x = rng.uniform(-1, 1, (STEPS, size, FEATURES)).astype("float32")
    return x, np.zeros((size, HIDDEN), "float32")


class RecurrentLoop(gluon.HybridBlock):
    """Input-to-hidden and hidden-to-hidden projections for ``gates`` gates."""

    def __init__(self, gates, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.i2h = gluon.nn.Dense(gates * HIDDEN, in_units=FEATURES)
            self.h2h = gluon.nn.Dense(gates * HIDDEN, in_units=HIDDEN)


class UnrolledLSTM(RecurrentLoop):
    """An LSTM over a fixed number of steps, one cell written out per step."""

    def __init__(self):
        super().__init__(gates=4)

    def hybrid_forward(self, F, x, h0):
        h, c = h0, h0
        outputs = []
        for step in F.split(x, num_outputs=STEPS, axis=0, squeeze_axis=True):
            gates = self.i2h(step) + self.h2h(h)
            i, f, g, o = F.split(gates, num_outputs=4, axis=1)
            c = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(g)
            h = F.sigmoid(o) * F.tanh(c)
            outputs.append(F.expand_dims(h, axis=0))
        return F.concat(*outputs, dim=0), c


class UnrolledGRU(RecurrentLoop):
    """A GRU over a fixed number of steps (MXNet's gate layout r, z, n)."""

    def __init__(self):
        super().__init__(gates=3)

    def hybrid_forward(self, F, x, h):
        for t in range(STEPS):
            step = F.squeeze(F.slice_axis(x, axis=0, begin=t, end=t + 1), axis=0)
            i_r, i_z, i_n = F.SliceChannel(self.i2h(step), num_outputs=3, axis=1)
            h_r, h_z, h_n = F.SliceChannel(self.h2h(h), num_outputs=3, axis=1)
            reset = F.sigmoid(i_r + h_r)
            update = F.sigmoid(i_z + h_z)
            candidate = F.tanh(i_n + reset * h_n)
            h = (1 - update) * candidate + update * h
        return h


def lenet():
    net = gluon.nn.HybridSequential()
    with net.name_scope():
        net.add(gluon.nn.Conv2D(6, kernel_size=5, in_channels=1), gluon.nn.BatchNorm(in_channels=6),
                gluon.nn.Activation("relu"), gluon.nn.MaxPool2D(pool_size=2, strides=2),
                gluon.nn.Conv2D(16, kernel_size=3, in_channels=6, activation="tanh"),
                gluon.nn.AvgPool2D(pool_size=2, strides=2), gluon.nn.Flatten(),
                gluon.nn.Dense(32, activation="relu", in_units=64), gluon.nn.Dropout(0.5),
                gluon.nn.Dense(10, in_units=32))
    return net


# A fixed tree over 5 leaves: nested tuples of leaf indices.
TREE = ((0, 1), (2, (3, 4)))
LEAVES = 5


class ChildSumTreeLSTM(gluon.HybridBlock):
    """Child-sum Tree-LSTM over TREE; leaves read rows of x, internal nodes only children."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.leaf = gluon.nn.Dense(3 * HIDDEN, in_units=FEATURES)  # i, o, u
            self.iou = gluon.nn.Dense(3 * HIDDEN, in_units=HIDDEN)
            self.forget = gluon.nn.Dense(HIDDEN, in_units=HIDDEN)

    def _cell(self, F, iou, c_children):
        i, o, u = F.split(iou, num_outputs=3, axis=1)
        c = F.sigmoid(i) * F.tanh(u) + c_children
        return F.sigmoid(o) * F.tanh(c), c

    def _node(self, F, tree, leaves):
        if isinstance(tree, int):
            return self._cell(F, self.leaf(leaves[tree]), 0)
        children = [self._node(F, child, leaves) for child in tree]
        h_sum = F.add_n(*[h for h, _ in children])
        c_children = F.add_n(*[F.sigmoid(self.forget(h)) * c for h, c in children])
        return self._cell(F, self.iou(h_sum), c_children)

    def hybrid_forward(self, F, x):
        leaves = F.split(x, num_outputs=LEAVES, axis=1, squeeze_axis=True)
        h, _ = self._node(F, TREE, leaves)
        return F.softmax(h)


def initialized(block, seed=0):
    mx.random.seed(seed)
    block.initialize(mx.init.Xavier())
    return block


def test_unrolled_lstm():
    check_hybrid_block(initialized(UnrolledLSTM()), sequence_batch,
                       {"data0": {1: "batch"}, "data1": {0: "batch"}})


def test_unrolled_gru():
    check_hybrid_block(initialized(UnrolledGRU()), sequence_batch,
                       {"data0": {1: "batch"}, "data1": {0: "batch"}})


def test_lenet_with_batch_norm_and_dropout():
    net = initialized(lenet())
    rng = np.random.RandomState(3)
    batch_norm = net[1]
    batch_norm.running_mean.set_data(mx.nd.array(rng.uniform(-0.5, 0.5, 6)))
    batch_norm.running_var.set_data(mx.nd.array(rng.uniform(0.5, 2.0, 6)))
    batch_norm.gamma.set_data(mx.nd.array(rng.uniform(0.5, 1.5, 6)))
    batch_norm.beta.set_data(mx.nd.array(rng.uniform(-0.5, 0.5, 6)))

    def images(size):
        return [np.random.RandomState(size).uniform(-1, 1, (size, 1, 16, 16)).astype("float32")]

    check_hybrid_block(net, images, {"data": {0: "batch"}})


def test_tree_lstm_on_a_fixed_tree():
    def leaves(size):
        x = np.random.RandomState(size).uniform(-1, 1, (size, LEAVES, FEATURES))
        return [x.astype("float32")]

    check_hybrid_block(initialized(ChildSumTreeLSTM()), leaves, {"data": {0: "batch"}})
