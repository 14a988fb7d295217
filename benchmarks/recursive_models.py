"""Recursive models on new trees: a child-sum Tree-LSTM and a TreeRNN over random
binary trees of 20-30 leaves, and the same Tree-LSTM reading its leaves' inputs
as `x[tree.idx]` from the sentence embedded once per call and passed down the
recursion (the usual idiom); a stream of distinct trees (1,000 by default), one
tree per call and minibatches of 25 trees per call, inference and training.

Variants, interleaved (benchmarks/harness.py: outputs checked against the
imperative run during warm-up, inputs made before the timed calls, medians):
- imperative:     the Block as written, recursing in Python, op by op;
- dynamic:        the same Block with hybridize(dynamic=True): the recursion engine
                  runs each body compiled once per signature, nodes batched by height,
                  a call's groups composed into one whole-call program;
- dynamic tvm:    hybridize(dynamic=True, backend="tvm"), inference (training runs
                  the same MXNet graphs as dynamic);
- pytorch eager:  the same model in PyTorch, in a process of its own, when `make
                  setup` installed it.
The dynamic variants must have served every timed call by the recursion engine
(the block's report says so); the run stops otherwise.
"""
import argparse
import contextlib

import mxnet as mx
import numpy as np
from mxnet import gluon

import gluon_dyn
import harness
import torch_twins

HIDDEN, EMBED, VOCAB, CLASSES = 150, 300, 1000, 5
LEAVES = (20, 31)          # leaves per tree: 20 to 30
BATCH = 25                 # trees per call in the minibatch streams
WARMUP = 8                 # calls: 3 profiled, bodies traced, TVM plans compiled


class Tree:
    def __init__(self, word=None, children=()):
        self.word, self.children = word, list(children)


def random_tree(rng, leaves):
    if leaves == 1:
        return Tree(word=mx.nd.array([rng.randint(VOCAB)]))
    split = rng.randint(1, leaves)
    return Tree(children=[random_tree(rng, split), random_tree(rng, leaves - split)])


class TreeLSTM(gluon.Block):
    """Tai et al.'s child-sum Tree-LSTM; `forward` scores a list of trees."""

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
            i, o, u = mx.nd.split(self.iou_x(self.embed(tree.word)), num_outputs=3, axis=1)
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

    def forward(self, trees):
        return mx.nd.concat(*[self.out(self.node(tree)[0]) for tree in trees], dim=0)


class SentenceTree:
    """A node of a parse of a sentence: a leaf holds the position of its word."""

    def __init__(self, idx=None, children=()):
        self.idx, self.children = idx, list(children)


def sentence_tree(rng, leaves, start=0):
    """A random binary tree over the words start .. start + leaves - 1, in order."""
    if leaves == 1:
        return SentenceTree(idx=start)
    split = rng.randint(1, leaves)
    return SentenceTree(children=[sentence_tree(rng, split, start),
                                  sentence_tree(rng, leaves - split, start + split)])


class SentenceTreeLSTM(TreeLSTM):
    """The child-sum Tree-LSTM reading a leaf's input as the usual idiom does,
    `x[tree.idx]`, from the sentence embedded once per call and passed down the
    recursion; `forward` scores a list of (sentence, tree) pairs."""

    def node(self, x, tree):
        if not tree.children:
            word = x[tree.idx].expand_dims(axis=0)
            i, o, u = mx.nd.split(self.iou_x(word), num_outputs=3, axis=1)
            c = mx.nd.sigmoid(i) * mx.nd.tanh(u)
            return mx.nd.sigmoid(o) * mx.nd.tanh(c), c
        states = [self.node(x, child) for child in tree.children]
        h_sum = states[0][0]
        for h, _ in states[1:]:
            h_sum = h_sum + h
        i, o, u = mx.nd.split(self.iou_h(h_sum), num_outputs=3, axis=1)
        c = mx.nd.sigmoid(i) * mx.nd.tanh(u)
        for h, child_c in states:
            c = c + mx.nd.sigmoid(self.f_h(h)) * child_c
        return mx.nd.sigmoid(o) * mx.nd.tanh(c), c

    def forward(self, sentences):
        return mx.nd.concat(*[self.out(self.node(self.embed(words), tree)[0])
                              for words, tree in sentences], dim=0)


class TreeRNN(gluon.Block):
    """Socher et al.'s recursive network: a leaf is its word's embedding, a node
    tanh(W [left; right] + b)."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.embed = gluon.nn.Embedding(VOCAB, HIDDEN)
            self.compose = gluon.nn.Dense(HIDDEN, in_units=2 * HIDDEN)
            self.out = gluon.nn.Dense(CLASSES, in_units=HIDDEN)

    def encode(self, tree):
        if not tree.children:
            return self.embed(tree.word)
        left, right = tree.children
        return mx.nd.tanh(self.compose(mx.nd.concat(self.encode(left), self.encode(right),
                                                    dim=1)))

    def forward(self, trees):
        return mx.nd.concat(*[self.out(self.encode(tree)) for tree in trees], dim=0)


def torch_twin(block):
    """The torch_twins builder computing what `block` (a TreeLSTM, SentenceTreeLSTM or
    TreeRNN) computes, and its arguments (the parameter values)."""
    if isinstance(block, TreeLSTM):
        return ("build_tree_lstm",) + tuple(harness.layer_values(layer) for layer in (
            block.embed, block.iou_x, block.iou_h, block.f_h, block.out))
    return ("build_tree_rnn",) + tuple(harness.layer_values(layer) for layer in (
        block.embed, block.compose, block.out))


def plain_trees(arguments):
    """`encode` for the PyTorch worker: a call's trees as torch_twins.Trees, words as
    numpy arrays (picklable without MXNet)."""
    def plain(tree):
        return torch_twins.Tree(None if tree.word is None else tree.word.asnumpy(),
                                [plain(child) for child in tree.children])
    return ([plain(tree) for tree in arguments[0]],)


def plain_sentence_trees(arguments):
    """`encode` for the PyTorch worker of a SentenceTreeLSTM: each (sentence, tree) as
    the torch_twins.Tree its Tree-LSTM twin takes, a leaf's word its word of the
    sentence (a row of the embedded sentence is the embedding of its word)."""
    def plain(tree, words):
        return torch_twins.Tree(None if tree.idx is None else words[tree.idx:tree.idx + 1],
                                [plain(child, words) for child in tree.children])
    return ([plain(tree, words.asnumpy()) for words, tree in arguments[0]],)


def torch_variants(workers, block, train, threads=None):
    """The "pytorch eager" variant of `block`'s model with its parameter values, in a
    worker that `workers` (a contextlib.ExitStack) closes; none without PyTorch."""
    encode = plain_sentence_trees if isinstance(block, SentenceTreeLSTM) else plain_trees
    return harness.torch_variants(workers, *torch_twin(block), names=("pytorch eager",),
                                  train=train, threads=threads, encode=encode)


def make_stream(seed, trees_per_call, sentences=False):
    """`make_inputs` of a stream: call `n` gets new random trees (new arrays),
    the same ones for every variant; with `sentences`, (sentence, tree over its
    words) pairs."""
    def make_inputs(call):
        rng = np.random.RandomState(seed * 100003 + call)
        if sentences:
            lengths = [rng.randint(*LEAVES) for _ in range(trees_per_call)]
            return ([(mx.nd.array(rng.randint(VOCAB, size=words)), sentence_tree(rng, words))
                     for words in lengths],)
        return ([random_tree(rng, rng.randint(*LEAVES)) for _ in range(trees_per_call)],)
    return make_inputs


def variants(model, train, tvm_cache, workers):
    """The variants of one row, and the dynamic blocks whose reports must show the
    recursion engine served them; `workers` (a contextlib.ExitStack) closes PyTorch's."""
    mx.random.seed(0)
    blocks = {name: model() for name in ("imperative", "dynamic", "dynamic tvm")}
    for block in blocks.values():
        block.initialize(mx.init.Xavier())
    harness.copy_params(blocks["imperative"], blocks["dynamic"], blocks["dynamic tvm"])
    blocks["dynamic"].hybridize(dynamic=True)
    blocks["dynamic tvm"].hybridize(dynamic=True, backend="tvm",
                                    backend_options={"cache_dir": tvm_cache})
    names = ["imperative", "dynamic"] + ([] if train else ["dynamic tvm"])
    chosen = [harness.Variant(name, harness.gluon_call(blocks[name], train)) for name in names]
    chosen += torch_variants(workers, blocks["imperative"], train)
    return chosen, {name: blocks[name] for name in names[1:]}


def check_served(blocks, calls):
    """Every call after the profiled ones ran on the recursion engine; the
    "dynamic" block's recursion report."""
    for name, block in blocks.items():
        report = gluon_dyn.hybridize.report(block)
        served = report["calls"]["by_kind"]["recursion"]
        if served != calls - 3:
            raise SystemExit("%s: the recursion engine served %d of %d calls (%s)"
                             % (name, served, calls, report["recursion"]["state"]))
    return gluon_dyn.hybridize.report(blocks["dynamic"])["recursion"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--trees", type=int, default=1000,
                        help="distinct trees timed per stream and mode")
    parser.add_argument("--models", default="treelstm,treernn,sentence")
    parser.add_argument("--per-call", default="1,%d" % BATCH,
                        help="trees per call of each stream, comma-separated")
    parser.add_argument("--tvm-cache", default=None,
                        help="TVM's compile cache (default: gluon_dyn's user cache)")
    args = parser.parse_args()
    models = {"treelstm": ("Tree-LSTM", TreeLSTM), "treernn": ("TreeRNN", TreeRNN),
              "sentence": ("Tree-LSTM reading x[tree.idx]", SentenceTreeLSTM)}
    rows = []
    for seed, key in enumerate(args.models.split(",")):
        title, model = models[key]
        for per_call in [int(count) for count in args.per_call.split(",")]:
            for train in (False, True):
                calls = max(1, args.trees // per_call)
                with contextlib.ExitStack() as workers:
                    chosen, blocks = variants(model, train, args.tvm_cache, workers)
                    stream = make_stream(seed, per_call, sentences=model is SentenceTreeLSTM)
                    timing = harness.compare(chosen, stream, repeats=calls, warmup=WARMUP)
                made = timing["imperative"]
                recursion = check_served(blocks, len(made.warmup_ms) + len(made.timed_ms))
                ms = {name: t.median_ms for name, t in timing.items()}
                rows.append([title, "%d tree%s" % (per_call, "s" if per_call > 1 else ""),
                             "training" if train else "inference",
                             ms["imperative"] / per_call, ms["dynamic"] / per_call,
                             ms["dynamic tvm"] / per_call if "dynamic tvm" in ms else "-",
                             ms["pytorch eager"] / per_call if "pytorch eager" in ms else "-",
                             harness.ratio(ms["imperative"], ms["dynamic"]),
                             harness.ratio(ms["imperative"], ms["dynamic tvm"])
                             if "dynamic tvm" in ms else "-",
                             harness.ratio(ms["imperative"], ms["pytorch eager"])
                             if "pytorch eager" in ms else "-",
                             "%.1f" % (recursion["batched_calls"] / recursion["calls"]),
                             "%d%%" % round(100 * recursion["programs"]["calls"] /
                                            recursion["calls"])])
                print(" | ".join(str(cell) for cell in rows[-1]), flush=True)
    harness.print_table(
        "New random trees (%d per stream and mode, %d-%d leaves), ms per tree" % (
            args.trees, LEAVES[0], LEAVES[1] - 1),
        ["model", "per call", "mode", "imperative", "dynamic", "dynamic tvm", "pytorch eager",
         "dynamic vs imp.", "tvm vs imp.", "pytorch vs imp.", "groups per call",
         "calls as one program"], rows)


if __name__ == "__main__":
    main()
