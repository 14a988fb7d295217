"""Loops and branches on tensors nested in each other are traced once per pass of the
code around them (probe_findings.py): a loop nested d deep runs its body d + 1
times while the call is traced, where probing at every encounter ran it 2^d times,
and the graphs give what the code as written gives.
"""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_dyn
from gluon_dyn.hybridize.conversion.operators import probe_findings
from dynamic_twins import assert_same, calls_on_graphs, gradients, twins


class Ticks:
    """Counts the runs of the code that calls `tick` (trace-time runs, in a trace)."""

    def __init__(self):
        self.count = 0

    def tick(self):
        self.count += 1


INNERMOST = Ticks()


def shrink(value, layer):
    if mx.nd.sum(value) > 0:
        return mx.nd.tanh(layer(value))
    return value * 0.5


class Nested(gluon.Block):
    """Four loops on tensors, each inside the one before, with branches on tensors, a
    helper returning from inside an `if`, a list of tensors no branch changes and a
    Python number the loops leave alone."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(3, in_units=3)
        self.scale = 0.5

    def forward(self, x, limit):
        pair = [x * 0.1, x * 0.2]
        i = mx.nd.zeros((1,))
        while mx.nd.sum(i) < mx.nd.sum(limit):
            i = i + 1
            j = mx.nd.zeros((1,))
            while mx.nd.sum(j) < 2:
                j = j + 1
                if mx.nd.sum(x) > 0:
                    x = shrink(x, self.dense) + pair[0]
                k = mx.nd.zeros((1,))
                while mx.nd.sum(k) < 2:
                    k = k + 1
                    m = mx.nd.zeros((1,))
                    while mx.nd.sum(m) < 1:
                        m = m + 1
                        INNERMOST.tick()
                        if mx.nd.sum(x) < 1:
                            x = x * self.scale + pair[1]
                        else:
                            x = x - 0.25
        return x + pair[0]


def call(block, x, limit, record):
    block.collect_params().zero_grad()   # a parameter a call does not reach: zero on both
    x = mx.nd.array(x)
    x.attach_grad()
    with autograd.record(record):
        y = block(x, mx.nd.array([limit]))
    if record:
        y.backward()
    return y, x.grad


def test_nested_loops_and_branches_are_traced_linearly_and_agree_with_python():
    imperative, dynamic = twins(Nested, seed=3, profile_calls=1,
                                check_speed=False)
    rng = np.random.RandomState(0)
    inputs = [(rng.uniform(-1, 1, (2, 3)) * sign, limit)
              for sign in (1, -1) for limit in (0, 1, 3)]
    traced = []
    for number, (x, limit) in enumerate(inputs * 2):
        record = number % 2 == 0
        expected = call(imperative, x, limit, record)
        before = INNERMOST.count
        got = call(dynamic, x, limit, record)
        traced.append(INNERMOST.count - before)
        assert_same(got[0], expected[0], "call %d output" % number)
        if record:
            assert_same(got[1], expected[1], "call %d input gradient" % number)
            assert_same(gradients(dynamic), gradients(imperative), "call %d gradients" % number)
    # Graphs serve every call after the profiled one but the next: the profiled call
    # ran the outer loop 0 times, the graph speculating that fails its guard.
    report = gluon_dyn.hybridize.report(dynamic)
    assert calls_on_graphs(dynamic) == len(traced) - 2 and report["calls"]["last"] == "graph", \
        report
    # Four loops deep: the innermost body runs 5 times per trace (2^4 = 16 before).
    assert max(traced) == 5, traced


@pytest.mark.parametrize("kind", ["symbol", "python", "undefined", "tensor list"])
def test_findings_serve_only_a_loop_starting_from_the_same_kinds(kind):
    x = mx.sym.var("x")
    values = {"symbol": (x, x + 1), "python": ("a", "a"), "tensor list": ([x], [x * 2]),
              "undefined": (probe_findings.Undefined("v"), probe_findings.Undefined("v"))}
    recorded, now = values[kind]
    findings = probe_findings.ProbeFindings("f.py:3", [recorded], None, [])
    assert findings.serves("f.py:3", [recorded])
    assert not findings.serves("f.py:4", [recorded])
    assert findings.serves("f.py:3", [now])
    assert not findings.serves("f.py:3", [recorded, recorded])
    assert not findings.serves("f.py:3", ["b" if kind != "python" else x])
