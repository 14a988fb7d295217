"""Recursive Gluon programs for the recursion engine's tests: forwards that recurse
over Python trees in the ways users write them."""
import io

import mxnet as mx
import numpy as np
from mxnet import gluon

HIDDEN, EMBED, VOCAB, CLASSES = 8, 6, 20, 3


class Tree:
    def __init__(self, word=None, children=(), label=0, vector=None):
        self.word, self.children, self.label, self.vector = word, list(children), label, vector

    def is_leaf(self):
        return not self.children


def random_tree(rng, leaves, arity=2, vectors=False):
    """A random tree with `leaves` leaves; internal nodes have 2..`arity` children
    (1..arity when arity allows unary chains is not needed: see chain)."""
    if leaves == 1:
        return Tree(word=mx.nd.array([rng.randint(VOCAB)]), label=int(rng.randint(3)),
                    vector=mx.nd.array(rng.standard_normal((1, EMBED))) if vectors else None)
    count = min(leaves, int(rng.randint(2, arity + 1)))
    cuts = sorted(rng.choice(np.arange(1, leaves), count - 1, replace=False))
    sizes = np.diff([0] + list(cuts) + [leaves])
    return Tree(children=[random_tree(rng, int(size), arity, vectors) for size in sizes],
                label=int(rng.randint(3)))


def chain(depth, rng, vectors=False):
    """A tree `depth` levels deep: each internal node has a leaf and a deeper node."""
    node = random_tree(rng, 1, vectors=vectors)
    for _ in range(depth):
        node = Tree(children=[node, random_tree(rng, 1, vectors=vectors)],
                    label=int(rng.randint(3)))
    return node


class ChildSumTreeLSTM(gluon.Block):
    """Tai et al.'s child-sum Tree-LSTM, any number of children."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.embed = gluon.nn.Embedding(VOCAB, EMBED)
            self.iou_x = gluon.nn.Dense(3 * HIDDEN, in_units=EMBED)
            self.iou_h = gluon.nn.Dense(3 * HIDDEN, in_units=HIDDEN, use_bias=False)
            self.f_h = gluon.nn.Dense(HIDDEN, in_units=HIDDEN)
            self.out = gluon.nn.Dense(CLASSES, in_units=HIDDEN)

    def node(self, tree):
        if not tree.children:
            iou = self.iou_x(self.embed(tree.word))
            i, o, u = mx.nd.split(iou, num_outputs=3, axis=1)
            c = mx.nd.sigmoid(i) * mx.nd.tanh(u)
            return mx.nd.sigmoid(o) * mx.nd.tanh(c), c
        states = [self.node(child) for child in tree.children]
        h_sum = states[0][0]
        for h, _ in states[1:]:
            h_sum = h_sum + h
        i, o, u = mx.nd.split(self.iou_h(h_sum), num_outputs=3, axis=1)
        c = mx.nd.sigmoid(i) * mx.nd.tanh(u)
        for h, child_c in states:
            c = c + mx.nd.sigmoid(self.f_h(h)) * child_c
        return mx.nd.sigmoid(o) * mx.nd.tanh(c), c

    def forward(self, tree):
        return self.out(self.node(tree)[0])


class MinibatchTreeLSTM(ChildSumTreeLSTM):
    """A minibatch of trees per call: the losses summed."""

    def forward(self, trees):
        loss = None
        for tree in trees:
            scores = mx.nd.log_softmax(self.out(self.node(tree)[0]))
            picked = mx.nd.pick(scores, mx.nd.array([tree.label]), axis=1)
            loss = -picked if loss is None else loss - picked
        return loss


class TreeRNN(gluon.Block):
    """Socher et al.'s recursive network over binary trees, leaves given as vectors
    (inputs that get gradients)."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.leaf = gluon.nn.Dense(HIDDEN, in_units=EMBED)
            self.compose = gluon.nn.Dense(HIDDEN, in_units=2 * HIDDEN)
            self.out = gluon.nn.Dense(CLASSES, in_units=HIDDEN)

    def encode(self, tree):
        if tree.is_leaf():
            return mx.nd.tanh(self.leaf(tree.vector))
        left, right = tree.children
        return mx.nd.tanh(self.compose(mx.nd.concat(self.encode(left), self.encode(right),
                                                    dim=1)))

    def forward(self, trees):
        return mx.nd.concat(*[self.out(self.encode(tree)) for tree in trees], dim=0)


class LabelGatedRNN(TreeRNN):
    """Branches on a Python value of each node (its label) and on a flag of the block."""

    def __init__(self):
        super().__init__()
        self.gate = True
        with self.name_scope():
            self.gated = gluon.nn.Dense(HIDDEN, in_units=HIDDEN)

    def encode(self, tree):
        if tree.is_leaf():
            h = mx.nd.tanh(self.leaf(tree.vector))
        else:
            h = mx.nd.tanh(self.compose(mx.nd.concat(*[self.encode(c) for c in tree.children],
                                                     dim=1)))
        if self.gate and tree.label == 2:
            h = mx.nd.relu(self.gated(h)) + h
        return h


class RecursiveForward(gluon.Block):
    """The forward itself recurses (`self(child)`), returning one array."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.embed = gluon.nn.Embedding(VOCAB, HIDDEN)
            self.compose = gluon.nn.Dense(HIDDEN, in_units=HIDDEN)

    def forward(self, tree):
        if tree.is_leaf():
            return self.embed(tree.word)
        total = self(tree.children[0])
        for child in tree.children[1:]:
            total = total + self(child)
        return mx.nd.tanh(self.compose(total))


class MutualRecursion(TreeRNN):
    """Two methods calling each other, with a context array passed down unchanged."""

    def encode(self, tree, context):
        if tree.is_leaf():
            return mx.nd.tanh(self.leaf(tree.vector) + context)
        return self.pair(tree.children, context)

    def pair(self, children, context):
        left = self.encode(children[0], context)
        right = self.encode(children[1], context)
        return mx.nd.tanh(self.compose(mx.nd.concat(left, right, dim=1)))

    def forward(self, trees, context):
        return mx.nd.concat(*[self.out(self.encode(tree, context)) for tree in trees], dim=0)


class WholeSumRNN(TreeRNN):
    """A body that sums over every axis: each node runs as its own call."""

    def encode(self, tree):
        if tree.is_leaf():
            h = mx.nd.tanh(self.leaf(tree.vector))
        else:
            h = mx.nd.tanh(self.compose(mx.nd.concat(self.encode(tree.children[0]),
                                                     self.encode(tree.children[1]), dim=1)))
        return h / (1 + mx.nd.sum(mx.nd.abs(h)))


class TopDownRNN(TreeRNN):
    """Passes an array its caller computed down the recursion: not for the engine."""

    def encode(self, tree, above):
        h = mx.nd.tanh(self.leaf(tree.vector) + above) if tree.is_leaf() else above
        for child in tree.children:
            h = h + self.encode(child, mx.nd.tanh(above))
        return h

    def forward(self, trees):
        start = mx.nd.zeros((1, HIDDEN))
        return mx.nd.concat(*[self.out(self.encode(tree, start)) for tree in trees], dim=0)


class CountingRNN(TreeRNN):
    """Counts its calls on the block: number state, which the recursion engine does
    not keep (the runner's graphs do)."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, trees):
        self.calls += 1
        return super().forward(trees)


class PrintingRNN(TreeRNN):
    """Prints on every call: the forward runs as Python."""

    def forward(self, trees):
        print(len(trees), file=LOG)
        return super().forward(trees)


LOG = io.StringIO()


class PerNodeValueRNN(TreeRNN):
    """Builds an array from a per-node Python value: every node a new signature."""

    def encode(self, tree):
        if tree.is_leaf():
            return mx.nd.tanh(self.leaf(tree.vector) * float(tree.serial))
        return mx.nd.tanh(self.compose(mx.nd.concat(self.encode(tree.children[0]),
                                                    self.encode(tree.children[1]), dim=1)))


def number_leaves(tree, start=0):
    """Gives every leaf a `serial` number; returns the next one."""
    if not tree.children:
        tree.serial = start
        return start + 1
    for child in tree.children:
        start = number_leaves(child, start)
    return start
