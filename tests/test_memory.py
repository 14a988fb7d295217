"""A block hybridized with dynamic=True is freed with its last reference, and with it
what its graphs hold; a call's arguments are not kept.

No reference cycle runs through a dynamic block and its runner (weak_binding.py):
the tests turn Python's cyclic collector off and check that both are gone the
moment the program drops the block, whatever served its calls, and that resident
memory stays flat over a loop that builds a network per iteration.
"""
import gc
import json
import os
import subprocess
import sys
import textwrap
import warnings
import weakref

import mxnet as mx
import pytest
from mxnet import gluon

import gluon_dyn
from gluon_dyn.hybridize.capturing import tracing


class Branchy(gluon.Block):
    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(8, in_units=16)
        self.steps = 0
        self.seen = []

    def forward(self, x, mode):
        self.steps += 1
        h = self.dense(x)
        if mode == "host read" and h.sum().asscalar() > 0:    # a graph break
            h = h * 2
        if mx.nd.sum(h) > 0:
            h = mx.nd.relu(h)
        if mode == "python":
            self.seen.insert(0, self.steps)     # no graph replays this: runs as Python
        return h


class Tree(gluon.Block):
    """Recursion over a Python tree: the recursion engine serves it."""

    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(4, in_units=4)

    def forward(self, node):
        if isinstance(node, mx.nd.NDArray):
            return self.dense(node)
        return self.forward(node[0]) + self.forward(node[1])


class HybridBranchy(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(8, in_units=16)

    def hybrid_forward(self, F, x):
        h = self.dense(x)
        if F.sum(h) > 0:
            h = F.relu(h)
        return h


def calls(block, kind):
    x = mx.nd.random.normal(shape=(4, 16))
    if kind == "recursion":
        # New structures on every call (one tree would be one graph's key).
        leaf = mx.nd.ones((1, 4))
        trees = [leaf]
        for _ in range(6):
            trees.append((trees[-1], leaf) if len(trees) % 2 else (leaf, trees[-1]))
        return [block(tree) for tree in trees[1:]]
    if isinstance(block, gluon.HybridBlock):
        return [block(x) for _ in range(6)]
    return [block(x, kind) for _ in range(6)]


@pytest.mark.parametrize("make, kind", [(Branchy, "graph"), (Branchy, "host read"),
                                        (Branchy, "python"), (HybridBranchy, "graph"),
                                        (Tree, "recursion")],
                         ids=["graphs", "graph segments", "fallback", "HybridBlock",
                              "recursion engine"])
def test_a_dynamic_block_is_freed_with_its_last_reference(make, kind):
    gc.collect()
    gc.disable()
    try:
        block = make()
        block.initialize()
        block.hybridize(dynamic=True, check_speed=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outputs = calls(block, kind)
        mx.nd.waitall()
        served = gluon_dyn.hybridize.report(block)["calls"]["by_kind"]
        expected = {"graph": "graph", "host read": "segments", "python": "fallback",
                    "recursion": "recursion"}[kind]
        assert served[expected] > 0, served
        # The block and its runner (its graphs, traces, recursion engine, segments).
        # Its children are Gluon's to free: Gluon's own collect_params() leaves
        # cyclic garbage that refers to them until the cyclic collector runs.
        refs = [weakref.ref(block), weakref.ref(vars(block)["forward"])]
        del block
        assert [ref() for ref in refs] == [None, None]
        assert len(outputs) == 6    # the outputs outlive the block
    finally:
        gc.enable()


def live_traces():
    gc.collect()
    # A dead weak proxy (weak_binding.scope_without_cycle's) raises on isinstance.
    return [o for o in gc.get_objects()
            if not isinstance(o, weakref.ProxyTypes) and isinstance(o, tracing.Trace)]


def test_the_traces_of_a_freed_block_are_freed_with_it():
    """Records kept per trace outside it (aliases.py's, keyed weakly by the trace) must
    not hold the trace: a value that refers to its weak key keeps it, and every Symbol
    the trace made, for the life of the process (10 MB and more per program)."""
    before = weakref.WeakSet(live_traces())
    block = Branchy()
    block.initialize()
    # Unspeculated, the tensor `if` is traced as a graph branch: the relu made inside
    # it is noted per trace.
    block.hybridize(dynamic=True, check_speed=False, speculate=False)
    calls(block, "graph")
    assert gluon_dyn.hybridize.report(block)["calls"]["by_kind"]["graph"] > 0
    del block
    assert [trace for trace in live_traces() if trace not in before] == []


LOOP = textwrap.dedent("""
    import warnings
    import mxnet as mx
    import gluon_dyn
    from mxnet import gluon
    warnings.simplefilter("ignore")

    class Net(gluon.Block):
        def __init__(self):
            super().__init__()
            self.dense = gluon.nn.Dense(8, in_units=64)

        def forward(self, x):
            h = self.dense(x)
            if h.sum() > 0:
                h = h * 2
            return h

    def resident_mb():
        return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2 ** 20

    for network in range(12):
        net = Net()
        net.initialize()
        net.hybridize(dynamic=%s, check_speed=False)
        x = mx.nd.ones((1024 * 1024, 64))     # 256 MB
        for _ in range(5):
            net(x).wait_to_read()
        del x
        print(round(resident_mb()), flush=True)
""")


def resident_memory_over_networks(dynamic, folder):
    """Resident MB after each of 12 networks, each called on its own 256 MB input."""
    script = folder / ("loop_%s.py" % dynamic)     # converted code needs a source file
    script.write_text(LOOP % dynamic)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=600, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert result.returncode == 0, result.stderr[-2000:]
    return [float(line) for line in result.stdout.split()]


@pytest.mark.long
def test_resident_memory_stays_flat_over_a_loop_of_networks(tmp_path):
    dynamic = resident_memory_over_networks(True, tmp_path)
    stock = resident_memory_over_networks(False, tmp_path)
    # Networks after the first few reuse MXNet's pooled memory: no input kept.
    assert max(dynamic[3:]) - dynamic[2] < 128, dynamic
    assert max(dynamic) < max(stock) + 192, (dynamic, stock)


def _chain(nodes):
    x = mx.sym.var("x")
    for _ in range(nodes):
        x = mx.sym.sigmoid(x + 1)
    return x


def _resident_mb():
    with open("/proc/self/status") as status:
        return int(next(line for line in status if line.startswith("VmRSS:")).split()[1]) / 1024


def test_a_graph_saved_as_json_or_to_a_file_is_not_leaked(tmp_path):
    # MXNet 1.9.1's tojson and save leak the graph's copy without amp_cast nodes
    # (here 2,000 nodes, about 1 MB a call): 200 calls of each would hold 400 MB.
    graph = _chain(1000)
    path = str(tmp_path / "graph.json")
    graph.tojson(), graph.save(path)
    before = _resident_mb()
    for _ in range(100):
        graph.tojson()
        graph.save(path)
        graph.save(path, False)
    assert _resident_mb() - before < 40


def test_saving_as_json_keeps_mxnets_meaning_of_remove_amp_cast():
    x = mx.sym.var("x")
    graph = mx.sym.amp_cast(x, dtype="float16") + 1
    def ops(text):
        return [node["op"] for node in json.loads(text)["nodes"]]
    assert ops(graph.tojson()) == ["null", "_plus_scalar"]
    assert ops(graph.tojson(remove_amp_cast=False)) == ["null", "amp_cast", "_plus_scalar"]
    assert ops(graph.tojson(False)) == ["null", "amp_cast", "_plus_scalar"]
    restored = mx.sym.load_json(graph.tojson())
    assert restored.list_inputs() == ["x"]
