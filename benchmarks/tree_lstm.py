"""Child-sum Tree-LSTM (hidden 150, embedding 300) over random trees of 20-30 leaves.

Trees per second, inference and training, imperative vs hybridize(dynamic=True), for
two streams: a small set of trees seen again and again (epochs over a small dataset:
one graph per tree structure), and a new random tree on every call (no structure
repeats: the block gives up specialising and runs as Python, at imperative speed).
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


def measure(stream, train, repeats):
    nets = build()
    for tree in stream[:repeats]:           # warm-up: profiling calls and first traces
        for net in nets.values():
            run(net, tree, train)
    times = {name: [] for name in nets}
    for tree in stream[repeats:]:
        for name, net in nets.items():
            start = time.perf_counter()
            run(net, tree, train)
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
    for stream_name, stream in streams.items():
        for train in (False, True):
            rate, report = measure(stream, train, repeats=16)
            print("%-20s %-9s imperative %6.1f trees/s  dynamic %6.1f trees/s  (%.2fx)  graphs %d%s"
                  % (stream_name, "training" if train else "inference", rate["imperative"],
                     rate["dynamic"], rate["dynamic"] / rate["imperative"],
                     report["cached_graphs"],
                     "; runs as Python: " + report["fallback"][:40] if report["fallback"] else ""))


if __name__ == "__main__":
    main()
