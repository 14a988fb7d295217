"""Child-sum Tree-LSTM (hidden 150, embedding 300) over random trees of 20-30 leaves.

Trees per second, inference and training, imperative vs hybridize(dynamic=True), for
two streams: a small set of trees seen again and again (epochs over a small dataset:
one graph per tree structure), and a new random tree on every call (no structure
repeats: the block gives up specialising and runs as Python, at imperative speed).
PyTorch eager runs the same model with the same weights for context when the
optional benchmark extra is installed (`make bench-extra`). benchmarks/harness.py
checks every output against the imperative run, gives each call a tree of new
arrays, warms up, interleaves and takes medians.
"""
import argparse

import mxnet as mx
import numpy as np
from mxnet import gluon

import gluon_dyn
import harness

HIDDEN, EMBED, VOCAB = 150, 300, 1000
WARMUP = 16


class Tree:
    def __init__(self, word=None, children=()):
        self.word, self.children = word, list(children)


def random_shape(rng, leaves):
    """A random binary tree as nested lists of word ids (no arrays yet)."""
    if leaves == 1:
        return rng.randint(VOCAB)
    split = rng.randint(1, leaves)
    return [random_shape(rng, split), random_shape(rng, leaves - split)]


def tree_of(shape, word_array):
    """A Tree of `shape` whose leaves hold new arrays made by word_array(word id)."""
    if isinstance(shape, list):
        return Tree(children=[tree_of(child, word_array) for child in shape])
    return Tree(word=word_array(shape))


class ChildSumTreeLSTM(gluon.Block):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.embed = gluon.nn.Embedding(VOCAB, EMBED)
            self.iou_x = gluon.nn.Dense(3 * HIDDEN, in_units=EMBED)
            self.iou_h = gluon.nn.Dense(3 * HIDDEN, in_units=HIDDEN, use_bias=False)
            self.f_h = gluon.nn.Dense(HIDDEN, in_units=HIDDEN)
            self.out = gluon.nn.Dense(5, in_units=HIDDEN)

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


class TorchTreeLSTM:
    """The same model in PyTorch eager, with the parameter values of a ChildSumTreeLSTM
    (context only; never a dependency)."""

    def __init__(self, torch, net):
        nn = torch.nn
        self.torch = torch
        self.embed, self.iou_x = nn.Embedding(VOCAB, EMBED), nn.Linear(EMBED, 3 * HIDDEN)
        self.iou_h = nn.Linear(HIDDEN, 3 * HIDDEN, bias=False)
        self.f_h, self.out = nn.Linear(HIDDEN, HIDDEN), nn.Linear(HIDDEN, 5)
        harness.torch_parameters(torch, [
            (self.embed.weight, net.embed.weight), (self.iou_x.weight, net.iou_x.weight),
            (self.iou_x.bias, net.iou_x.bias), (self.iou_h.weight, net.iou_h.weight),
            (self.f_h.weight, net.f_h.weight), (self.f_h.bias, net.f_h.bias),
            (self.out.weight, net.out.weight), (self.out.bias, net.out.bias)])
        self.parameters = [p for module in (self.embed, self.iou_x, self.iou_h, self.f_h,
                                            self.out) for p in module.parameters()]

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

    def __call__(self, tree):
        return self.out(self.node(tree)[0])


def variants(train, torch):
    mx.random.seed(0)
    nets = {"imperative": ChildSumTreeLSTM(), "dynamic": ChildSumTreeLSTM()}
    for net in nets.values():
        net.initialize(mx.init.Xavier())
    harness.copy_params(nets["imperative"], nets["dynamic"])
    nets["dynamic"].hybridize(dynamic=True)
    result = [harness.Variant(name, harness.gluon_call(net, train)) for name, net in nets.items()]
    if torch is not None:
        twin = TorchTreeLSTM(torch, nets["imperative"])
        result.append(harness.Variant(
            "pytorch eager", harness.torch_call(torch, twin, twin.parameters, train),
            # the same tree with its words as torch tensors
            prepare=lambda args: (tree_of(shape_of(args[0]), lambda word: torch.tensor(
                [word], dtype=torch.int64)),)))
    return result, nets["dynamic"]


def shape_of(tree):
    """The nested word ids of a Tree (inverse of tree_of)."""
    if tree.children:
        return [shape_of(child) for child in tree.children]
    return int(tree.word.asscalar())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=60,
                        help="calls per stream, the first %d of them warm-up" % WARMUP)
    args = parser.parse_args()
    rng = np.random.RandomState(0)
    dataset = [random_shape(rng, rng.randint(20, 31)) for _ in range(8)]
    streams = {"8 trees, repeated": [dataset[i % 8] for i in range(args.calls)],
               "new tree every call": [random_shape(rng, rng.randint(20, 31))
                                       for _ in range(args.calls)]}
    torch = harness.import_torch()
    rows = []
    for stream_name, stream in streams.items():
        for train in (False, True):
            runs, dynamic = variants(train, torch)
            timings = harness.compare(
                runs, lambda call: (tree_of(stream[call], lambda word: mx.nd.array([word])),),
                repeats=args.calls - WARMUP, warmup=WARMUP)
            rate = {name: 1000.0 / timing.median_ms for name, timing in timings.items()}
            report = gluon_dyn.hybridize.report(dynamic)
            rows.append([stream_name, "training" if train else "inference", rate["imperative"],
                         rate["dynamic"], harness.ratio(rate["dynamic"], rate["imperative"]),
                         rate.get("pytorch eager", "-"),
                         "runs as Python: " + report["fallback"][:40] if report["fallback"]
                         else "%d graphs" % report["cached_graphs"]])
    harness.print_table(
        "child-sum Tree-LSTM, hidden %d, trees of 20-30 leaves" % HIDDEN,
        ["stream", "mode", "imperative trees/s", "dynamic trees/s", "ratio",
         "PyTorch eager trees/s", "dynamic block"], rows)


if __name__ == "__main__":
    main()
