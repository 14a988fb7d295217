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
    """Passes an array its caller computed down the recursion (a top-down state):
    each node's callers run first."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.descend = gluon.nn.Dense(HIDDEN, in_units=HIDDEN)

    def encode(self, tree, above):
        h = mx.nd.tanh(self.leaf(tree.vector) + above) if tree.is_leaf() else above
        below = mx.nd.tanh(self.descend(above))
        for child in tree.children:
            h = h + self.encode(child, below)
        return h

    def forward(self, trees):
        start = mx.nd.zeros((1, HIDDEN))
        return mx.nd.concat(*[self.out(self.encode(tree, start)) for tree in trees], dim=0)


class SequentialDownRNN(TreeRNN):
    """A call receives what the call before it returned: the calls of a node
    cannot run together (the recursion engine gives up)."""

    def encode(self, tree, above):
        if tree.is_leaf():
            return mx.nd.tanh(self.leaf(tree.vector) + above)
        for child in tree.children:
            above = self.encode(child, above)
        return above

    def forward(self, trees):
        start = mx.nd.zeros((1, HIDDEN))
        return mx.nd.concat(*[self.out(self.encode(tree, start)) for tree in trees], dim=0)


# Sentences and their parses: nodes read their words' rows of the embedded sentence.

class Parse:
    """A node of a parse: `idx` the position of its word in the sentence (None for
    a node without one), its children."""

    def __init__(self, idx=None, children=()):
        self.idx, self.children = idx, list(children)


def constituency(rng, words, start=0, length=None):
    """A random binary tree whose leaves are the words start .. start + words - 1;
    given the sentence's `length`, odd positions counted from its end (negative)."""
    if words == 1:
        return Parse(idx=start - length if length is not None and start % 2 else start)
    split = int(rng.randint(1, words))
    return Parse(children=[constituency(rng, split, start, length),
                           constituency(rng, words - split, start + split, length)])


def dependency(rng, words):
    """A random dependency tree: every node a word, rooted at word 0."""
    nodes = [Parse(idx) for idx in range(words)]
    for index in range(1, words):
        nodes[rng.randint(index)].children.append(nodes[index])
    return nodes[0]


def sentence(rng, words):
    return mx.nd.array(rng.randint(VOCAB, size=words))


class SentenceTreeLSTM(gluon.Block):
    """The child-sum Tree-LSTM over binary parses, a leaf's input read as
    `x[tree.idx]` from the sentence embedded once per call (passed down the
    recursion); `forward` takes (sentence, parse) pairs."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.embed = gluon.nn.Embedding(VOCAB, EMBED)
            self.iou_x = gluon.nn.Dense(3 * HIDDEN, in_units=EMBED)
            self.iou_h = gluon.nn.Dense(3 * HIDDEN, in_units=HIDDEN, use_bias=False)
            self.f_h = gluon.nn.Dense(HIDDEN, in_units=HIDDEN)
            self.out = gluon.nn.Dense(CLASSES, in_units=HIDDEN)

    def node(self, x, tree):
        if not tree.children:
            i, o, u = mx.nd.split(self.iou_x(x[tree.idx].expand_dims(axis=0)), num_outputs=3,
                                  axis=1)
            c = mx.nd.sigmoid(i) * mx.nd.tanh(u)
            return mx.nd.sigmoid(o) * mx.nd.tanh(c), c
        states = [self.node(x, child) for child in tree.children]
        h_sum = states[0][0] + states[1][0]
        i, o, u = mx.nd.split(self.iou_h(h_sum), num_outputs=3, axis=1)
        c = mx.nd.sigmoid(i) * mx.nd.tanh(u)
        for h, child_c in states:
            c = c + mx.nd.sigmoid(self.f_h(h)) * child_c
        return mx.nd.sigmoid(o) * mx.nd.tanh(c), c

    def forward(self, pairs):
        return mx.nd.concat(*[self.out(self.node(self.embed(words), tree)[0])
                              for words, tree in pairs], dim=0)


class ChildSumLSTMCell(gluon.Block):
    """MXNet's example/gluon/tree_lstm cell: takes `F`, recurses with
    `self.forward(F, inputs, child)` on a dependency tree (every node a word,
    `inputs[tree.idx]`), calls `self.node_forward(...)` with the parameters'
    arrays, and returns `(h, [h, c])`."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.i2h_weight = self.params.get("i2h_weight", shape=(4 * HIDDEN, EMBED))
            self.hs2h_weight = self.params.get("hs2h_weight", shape=(3 * HIDDEN, HIDDEN))
            self.hc2h_weight = self.params.get("hc2h_weight", shape=(HIDDEN, HIDDEN))
            self.i2h_bias = self.params.get("i2h_bias", shape=(4 * HIDDEN,))
            self.hs2h_bias = self.params.get("hs2h_bias", shape=(3 * HIDDEN,))
            self.hc2h_bias = self.params.get("hc2h_bias", shape=(HIDDEN,))

    def forward(self, F, inputs, tree):   # pylint: disable=arguments-differ
        children_outputs = [self.forward(F, inputs, child) for child in tree.children]
        children_states = list(zip(*children_outputs))[1] if children_outputs else None
        return self.node_forward(F, F.expand_dims(inputs[tree.idx], axis=0), children_states,
                                 self.i2h_weight.data(), self.hs2h_weight.data(),
                                 self.hc2h_weight.data(), self.i2h_bias.data(),
                                 self.hs2h_bias.data(), self.hc2h_bias.data())

    def node_forward(self, F, inputs, children_states, i2h_weight, hs2h_weight, hc2h_weight,
                     i2h_bias, hs2h_bias, hc2h_bias):
        i2h = F.FullyConnected(data=inputs, weight=i2h_weight, bias=i2h_bias,
                               num_hidden=4 * HIDDEN)
        i2h_slices = F.split(i2h, num_outputs=4)
        i2h_iuo = F.concat(*[i2h_slices[i] for i in [0, 2, 3]], dim=1)
        if children_states:
            hs = F.add_n(*[state[0] for state in children_states])
            hc = F.concat(*[F.expand_dims(state[0], axis=1) for state in children_states], dim=1)
            cs = F.concat(*[F.expand_dims(state[1], axis=1) for state in children_states], dim=1)
            forget_gates = F.Activation(i2h_slices[1] + hc2h_bias + F.dot(hc, hc2h_weight),
                                        act_type="sigmoid")
        else:
            hs = F.zeros_like(i2h_slices[0])
        i2h_iuo = i2h_iuo + F.FullyConnected(data=hs, weight=hs2h_weight, bias=hs2h_bias,
                                             num_hidden=3 * HIDDEN)
        i_act, u_act, o_act = F.SliceChannel(i2h_iuo, num_outputs=3)
        next_c = F.Activation(i_act, act_type="sigmoid") * F.Activation(u_act, act_type="tanh")
        if children_states:
            next_c = F.sum(forget_gates * cs, axis=1) + next_c
        next_h = F.Activation(o_act, act_type="sigmoid") * F.Activation(next_c, act_type="tanh")
        return next_h, [next_h, next_c]


class PairTreeLSTM(gluon.Block):
    """Two sentences and their dependency trees, as MXNet's example's similarity
    model takes them (`F` first): each sentence embedded, each tree encoded."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.embed = gluon.nn.Embedding(VOCAB, EMBED)
            self.cell = ChildSumLSTMCell()
            self.out = gluon.nn.Dense(CLASSES, in_units=2 * HIDDEN)

    def forward(self, F, l_words, r_words, l_tree, r_tree):   # pylint: disable=arguments-differ
        left = self.cell(F, self.embed(l_words), l_tree)[1][1]
        right = self.cell(F, self.embed(r_words), r_tree)[1][1]
        return F.log_softmax(self.out(F.concat(left * right, F.abs(left - right), dim=1)))


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
