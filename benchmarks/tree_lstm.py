"""Child-sum Tree-LSTM (hidden 150, embedding 300) over random trees of 20-30 leaves.

Trees per second, inference and training, imperative vs hybridize(dynamic=True), for
two streams: a small set of trees seen again and again (epochs over a small dataset:
one graph per tree structure), and a new random tree on every call (no structure
repeats: the block gives up specialising and runs as Python, at imperative speed).
PyTorch eager runs the same model for context when the optional benchmark extra is
installed (`make bench-extra`).
"""
import argparse
import statistics
import time

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

import gluon_dyn

HIDDEN, EMBED, VOCAB = 150, 300, 1000


class Tree:
    def __init__(self, word=None, children=()):
        self.word, self.children = word, list(children)


def random_tree(rng, leaves):
    if leaves == 1:
        return Tree(word=mx.nd.array([rng.randint(VOCAB)]))
    split = rng.randint(1, leaves)
    return Tree(children=[random_tree(rng, split), random_tree(rng, leaves - split)])


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
    """The same model in PyTorch eager (context only; never a dependency)."""

    def __init__(self, torch):
        nn = torch.nn
        self.torch = torch
        self.embed, self.iou_x = nn.Embedding(VOCAB, EMBED), nn.Linear(EMBED, 3 * HIDDEN)
        self.iou_h = nn.Linear(HIDDEN, 3 * HIDDEN, bias=False)
        self.f_h, self.out = nn.Linear(HIDDEN, HIDDEN), nn.Linear(HIDDEN, 5)
        self.modules = [self.embed, self.iou_x, self.iou_h, self.f_h, self.out]
        torch.set_num_threads(2)

    def node(self, tree):
        t = self.torch
        if not tree.children:
            i, o, u = self.iou_x(self.embed(tree.torch_word)).chunk(3, dim=1)
            c = t.sigmoid(i) * t.tanh(u)
            return t.sigmoid(o) * t.tanh(c), c
        states = [self.node(child) for child in tree.children]
        h_sum = sum(h for h, _ in states)
        i, o, u = self.iou_h(h_sum).chunk(3, dim=1)
        c = t.sigmoid(i) * t.tanh(u)
        for h, child_c in states:
            c = c + t.sigmoid(self.f_h(h)) * child_c
        return t.sigmoid(o) * t.tanh(c), c

    def __call__(self, tree, train):
        if train:
            for module in self.modules:
                module.zero_grad()
            self.out(self.node(tree)[0]).sum().backward()
        else:
            with self.torch.no_grad():
                self.out(self.node(tree)[0])


def attach_torch_words(tree, torch):
    tree.torch_word = None if tree.word is None else torch.from_numpy(
        tree.word.asnumpy().astype("int64"))
    for child in tree.children:
        attach_torch_words(child, torch)


def build():
    mx.random.seed(0)
    nets = {"imperative": ChildSumTreeLSTM(), "dynamic": ChildSumTreeLSTM()}
    for net in nets.values():
        net.initialize(mx.init.Xavier())
    for (_, a), (_, b) in zip(sorted(nets["imperative"].collect_params().items()),
                              sorted(nets["dynamic"].collect_params().items())):
        b.set_data(a.data())
    nets["dynamic"].hybridize(dynamic=True)
    return nets


def run(net, tree, train):
    if train:
        with autograd.record():
            out = net(tree)
        out.backward()
    else:
        out = net(tree)
    mx.nd.waitall()
    return out


def measure(stream, train, repeats, torch):
    nets = build()
    runners = {name: (lambda net: lambda tree: run(net, tree, train))(net)
               for name, net in nets.items()}
    if torch is not None:
        torch_net = TorchTreeLSTM(torch)
        runners["pytorch eager"] = lambda tree: torch_net(tree, train)
    for tree in stream[:repeats]:           # warm-up: profiling calls and first traces
        for runner in runners.values():
            runner(tree)
    times = {name: [] for name in runners}
    for tree in stream[repeats:]:
        for name, runner in runners.items():
            start = time.perf_counter()
            runner(tree)
            times[name].append(time.perf_counter() - start)
    rate = {name: 1.0 / statistics.median(t) for name, t in times.items()}
    return rate, gluon_dyn.hybridize.report(nets["dynamic"])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=60)
    args = parser.parse_args()
    rng = np.random.RandomState(0)
    dataset = [random_tree(rng, rng.randint(20, 31)) for _ in range(8)]
    streams = {"8 trees, repeated": [dataset[i % 8] for i in range(args.calls)],
               "new tree every call": [random_tree(rng, rng.randint(20, 31))
                                       for _ in range(args.calls)]}
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        for tree in dataset + streams["new tree every call"]:
            attach_torch_words(tree, torch)
    for stream_name, stream in streams.items():
        for train in (False, True):
            rate, report = measure(stream, train, 16, torch)
            context = "  pytorch eager %6.1f trees/s" % rate["pytorch eager"] if torch else ""
            print("%-20s %-9s imperative %6.1f trees/s  dynamic %6.1f trees/s  (%.2fx)%s  graphs %d%s"
                  % (stream_name, "training" if train else "inference", rate["imperative"],
                     rate["dynamic"], rate["dynamic"] / rate["imperative"], context,
                     report["cached_graphs"],
                     "; runs as Python: " + report["fallback"][:40] if report["fallback"] else ""))


if __name__ == "__main__":
    main()
