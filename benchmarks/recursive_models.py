"""Recursive models on new trees: a child-sum Tree-LSTM and a TreeRNN over random
binary trees of 20-30 leaves, a stream of distinct trees (1,000 by default), one
tree per call and minibatches of 25 trees per call, inference and training.

Variants, interleaved (benchmarks/harness.py: outputs checked against the
imperative run during warm-up, inputs made before the timed calls, medians):
- imperative:     the Block as written, recursing in Python, op by op;
- dynamic:        the same Block with hybridize(dynamic=True): the recursion engine
                  runs each body compiled once per signature, nodes batched by height,
                  a call's groups composed into one whole-call program;
- dynamic tvm:    hybridize(dynamic=True, backend="tvm"), inference (training runs
                  the same MXNet graphs as dynamic);
- pytorch eager:  the same model in PyTorch, when `make bench-extra` installed it.
The dynamic variants must have served every timed call by the recursion engine
(the block's report says so); the run stops otherwise.
"""
import argparse

import mxnet as mx
import numpy as np
from mxnet import gluon

import gluon_dyn
import harness

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


class TorchTreeLSTM:
    """TreeLSTM in PyTorch eager (context only; never a dependency)."""

    def __init__(self, torch):
        nn = torch.nn
        self.torch = torch
        self.embed, self.iou_x = nn.Embedding(VOCAB, EMBED), nn.Linear(EMBED, 3 * HIDDEN)
        self.iou_h = nn.Linear(HIDDEN, 3 * HIDDEN, bias=False)
        self.f_h, self.out = nn.Linear(HIDDEN, HIDDEN), nn.Linear(HIDDEN, CLASSES)

    def pairs(self, net):
        return [(self.embed.weight, net.embed.weight), (self.iou_x.weight, net.iou_x.weight),
                (self.iou_x.bias, net.iou_x.bias), (self.iou_h.weight, net.iou_h.weight),
                (self.f_h.weight, net.f_h.weight), (self.f_h.bias, net.f_h.bias),
                (self.out.weight, net.out.weight), (self.out.bias, net.out.bias)]

    def node(self, tree):
        t = self.torch
        if not tree.children:
            i, o, u = self.iou_x(self.embed(tree.word)).chunk(3, dim=1)
            c = t.sigmoid(i) * t.tanh(u)
            return t.sigmoid(o) * t.tanh(c), c
        states = [self.node(child) for child in tree.children]
        h_sum = sum(h for h, _ in states)
        i, o, u = self.iou_h(h_sum).chunk(3, dim=1)
        c = t.sigmoid(i) * t.tanh(u)
        for h, child_c in states:
            c = c + t.sigmoid(self.f_h(h)) * child_c
        return t.sigmoid(o) * t.tanh(c), c

    def __call__(self, trees):
        return self.torch.cat([self.out(self.node(tree)[0]) for tree in trees], dim=0)


class TorchTreeRNN:
    """TreeRNN in PyTorch eager."""

    def __init__(self, torch):
        self.torch = torch
        self.embed = torch.nn.Embedding(VOCAB, HIDDEN)
        self.compose = torch.nn.Linear(2 * HIDDEN, HIDDEN)
        self.out = torch.nn.Linear(HIDDEN, CLASSES)

    def pairs(self, net):
        return [(self.embed.weight, net.embed.weight), (self.compose.weight, net.compose.weight),
                (self.compose.bias, net.compose.bias), (self.out.weight, net.out.weight),
                (self.out.bias, net.out.bias)]

    def encode(self, tree):
        if not tree.children:
            return self.embed(tree.word)
        left, right = tree.children
        return self.torch.tanh(self.compose(self.torch.cat([self.encode(left),
                                                            self.encode(right)], dim=1)))

    def __call__(self, trees):
        return self.torch.cat([self.out(self.encode(tree)) for tree in trees], dim=0)


def torch_trees(torch):
    """`prepare` for the torch variant: the trees again, words as torch tensors."""
    def convert(tree):
        word = None if tree.word is None else torch.from_numpy(
            tree.word.asnumpy().astype("int64"))
        return Tree(word, [convert(child) for child in tree.children])

    def prepare(arguments):
        return ([convert(tree) for tree in arguments[0]],)
    return prepare


def make_stream(seed, trees_per_call):
    """`make_inputs` of a stream: call `n` gets new random trees (new arrays),
    the same ones for every variant."""
    def make_inputs(call):
        rng = np.random.RandomState(seed * 100003 + call)
        return ([random_tree(rng, rng.randint(*LEAVES)) for _ in range(trees_per_call)],)
    return make_inputs


def variants(model, torch_model, train, torch, tvm_cache):
    """The variants of one row, and the dynamic blocks whose reports must show the
    recursion engine served them."""
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
    if torch is not None:
        twin = torch_model(torch)
        harness.torch_parameters(torch, twin.pairs(blocks["imperative"]))
        parameters = [pair[0] for pair in twin.pairs(blocks["imperative"])]
        chosen.append(harness.Variant("pytorch eager", harness.torch_call(torch, twin, parameters,
                                                                         train),
                                      prepare=torch_trees(torch)))
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
    parser.add_argument("--models", default="treelstm,treernn")
    parser.add_argument("--tvm-cache", default=None,
                        help="TVM's compile cache (default: gluon_dyn's user cache)")
    args = parser.parse_args()
    torch = harness.import_torch()
    models = {"treelstm": ("Tree-LSTM", TreeLSTM, TorchTreeLSTM),
              "treernn": ("TreeRNN", TreeRNN, TorchTreeRNN)}
    rows = []
    for seed, key in enumerate(args.models.split(",")):
        title, model, torch_model = models[key]
        for per_call in (1, BATCH):
            for train in (False, True):
                chosen, blocks = variants(model, torch_model, train, torch, args.tvm_cache)
                calls = max(1, args.trees // per_call)
                timing = harness.compare(chosen, make_stream(seed, per_call), repeats=calls,
                                         warmup=WARMUP)
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
