"""TreeRNN and Tree-LSTM sentiment on generated parse trees (JANUS's TreeRNN and
TreeLSTM workloads). The model recurses over a Python tree object in its forward.

Trees are random binary parses over a vocabulary of positive, negative and
neutral words and the word "not". Their labels follow a rule the model can
learn: a leaf's sentiment is its word's polarity (+1, -1, 0); a node whose left
child is "not" has the opposite sentiment of its right child, any other node
the sum of its children's; the label is whether the root's sentiment is > 0
(trees whose root sums to 0 are not generated).

    python examples/train/tree_sentiment.py --cell lstm --dynamic
    python examples/train/tree_sentiment.py --cell rnn
    horovodrun --gloo -np 2 -H localhost:2 python examples/train/tree_sentiment.py --dynamic

With --dynamic each tree structure seen gets its own graph; a stream of new
trees makes the block run as written (gluon_dyn's report says so).
"""
import sys

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

import datasets
import trainkit

POLAR_WORDS = 12                      # per polarity; ids: positive, negative, neutral, "not"
NOT = 3 * POLAR_WORDS
VOCAB = NOT + 1


class Tree:
    def __init__(self, word=None, left=None, right=None):
        self.word, self.left, self.right = word, left, right   # word: a (1,) NDArray at leaves


def polarity(word_id):
    if word_id < POLAR_WORDS:
        return 1
    return -1 if word_id < 2 * POLAR_WORDS else 0


def random_tree(rng, leaves):
    """(tree, sentiment) of a random parse with `leaves` words."""
    if leaves == 1:
        word = rng.randint(NOT)
        return Tree(word=mx.nd.array([word])), polarity(word)
    if leaves >= 2 and rng.rand() < 0.25:
        right, sentiment = random_tree(rng, leaves - 1)
        return Tree(left=Tree(word=mx.nd.array([NOT])), right=right), -sentiment
    split = rng.randint(1, leaves)
    (left, a), (right, b) = random_tree(rng, split), random_tree(rng, leaves - split)
    return Tree(left=left, right=right), a + b


def dataset(count, seed, min_leaves=4, max_leaves=12):
    rng = np.random.RandomState(seed)
    trees, labels = [], []
    while len(trees) < count:
        tree, sentiment = random_tree(rng, rng.randint(min_leaves, max_leaves + 1))
        if sentiment != 0:
            trees.append(tree)
            labels.append(float(sentiment > 0))
    return trees, np.array(labels, dtype="float32")


class TreeRNN(gluon.Block):
    def __init__(self, embed, hidden, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.embed = gluon.nn.Embedding(VOCAB, embed)
            self.leaf = gluon.nn.Dense(hidden, in_units=embed, activation="tanh")
            self.combine = gluon.nn.Dense(hidden, in_units=2 * hidden, activation="tanh")
            self.output = gluon.nn.Dense(2, in_units=hidden)

    def node(self, tree):
        if tree.word is not None:
            return self.leaf(self.embed(tree.word))
        return self.combine(mx.nd.concat(self.node(tree.left), self.node(tree.right), dim=1))

    def forward(self, tree):
        return self.output(self.node(tree))


class TreeLSTM(gluon.Block):
    """The binary (N-ary) Tree-LSTM of Tai et al.: a forget gate per child."""

    def __init__(self, embed, hidden, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.embed = gluon.nn.Embedding(VOCAB, embed)
            self.leaf = gluon.nn.Dense(3 * hidden, in_units=embed)
            self.gates = gluon.nn.Dense(5 * hidden, in_units=2 * hidden)
            self.output = gluon.nn.Dense(2, in_units=hidden)

    def node(self, tree):
        if tree.word is not None:
            i, o, u = mx.nd.split(self.leaf(self.embed(tree.word)), num_outputs=3, axis=1)
            c = mx.nd.sigmoid(i) * mx.nd.tanh(u)
            return mx.nd.sigmoid(o) * mx.nd.tanh(c), c
        (h_left, c_left), (h_right, c_right) = self.node(tree.left), self.node(tree.right)
        i, o, u, f_left, f_right = mx.nd.split(
            self.gates(mx.nd.concat(h_left, h_right, dim=1)), num_outputs=5, axis=1)
        c = (mx.nd.sigmoid(i) * mx.nd.tanh(u) + mx.nd.sigmoid(f_left) * c_left
             + mx.nd.sigmoid(f_right) * c_right)
        return mx.nd.sigmoid(o) * mx.nd.tanh(c), c

    def forward(self, tree):
        return self.output(self.node(tree)[0])


CELLS = {"rnn": TreeRNN, "lstm": TreeLSTM}


class SentimentTraining(trainkit.Training):
    def __init__(self, args, workers):
        self.args, self.workers = args, workers
        self.train_trees, self.train_labels = dataset(args.trees, seed=args.seed)
        self.test_trees, self.test_labels = dataset(args.test_trees, seed=args.seed + 1)
        mx.random.seed(args.seed)
        self.net = CELLS[args.cell](args.embed, args.hidden, prefix="tree%s_" % args.cell)
        self.net.initialize(mx.init.Xavier())
        trainkit.hybridize(self.net, args)
        self.trainer = workers.trainer(self.net.collect_params(), "adagrad",
                                       {"learning_rate": args.lr, "wd": 1e-4})
        self.blocks, self.trainers = {"model": self.net}, {"model": self.trainer}
        self.loss = gluon.loss.SoftmaxCrossEntropyLoss()

    def step(self, index, rng):
        rows = self.workers.share(list(datasets.epoch_batch(len(self.train_trees), self.args.batch_size,
                                                   index, self.args.seed)))
        # The step's labels as one array, a row per tree.
        labels = trainkit.batch_array(self.train_labels[rows])
        labels = [labels[k:k + 1] for k in range(len(rows))]
        with autograd.record():
            losses = [self.loss(self.net(self.train_trees[row]), label)
                      for row, label in zip(rows, labels)]
            loss = mx.nd.add_n(*losses)
        loss.backward()
        self.trainer.step(len(rows))
        return float(loss.asscalar()), len(rows)

    def evaluate(self):
        predicted = [int(self.net(tree).argmax(axis=1).asscalar()) for tree in self.test_trees]
        return {"test accuracy": float(np.mean(np.array(predicted) == self.test_labels))}

    def infer(self, rng):
        return mx.nd.softmax(self.net(self.test_trees[rng.randint(len(self.test_trees))])), 1


def add_arguments(parser):
    parser.add_argument("--cell", choices=sorted(CELLS), default="lstm")
    parser.add_argument("--embed", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--trees", type=int, default=2000, help="training trees")
    parser.add_argument("--test-trees", type=int, default=500)


NAME, TRAINING = "tree_sentiment", SentimentTraining
DEFAULTS = {"steps": 300, "batch_size": 25, "lr": 0.05}


def main(argv=None):
    return trainkit.main(sys.modules[__name__], argv)


if __name__ == "__main__":
    main(sys.argv[1:])
