"""`name=`: gluon_dyn's cond/foreach/while_loop as drop-ins for mx.sym.contrib's.

MXNet's operators name their subgraphs after `name` (cond: <name>_pred/_then/_else,
while_loop: <name>_cond/_func, foreach: <name>), numbered per process and prefixed by
the enclosing subgraph's name when nested. Ours must name them the same way.
"""
import json
import re

import mxnet as mx
import pytest

from gluon_dyn.ops import cond, foreach, while_loop
from conftest import nd


def subgraph_names(symbol):
    """The __subgraph_name__ of the nodes of each control-flow node's subgraphs, nested
    ones included, with the per-process counter replaced by '#'."""
    names = set()

    def visit(graph):
        for node in graph["nodes"]:
            name = node.get("attrs", {}).get("__subgraph_name__")
            if name:
                names.add(re.sub(r"\d+", "#", name))
            for sub in node.get("subgraphs", ()):
                visit(sub)
    visit(json.loads(symbol.tojson()))
    return names


def build(op, name):
    """(ours, MXNet's) symbols for one operator called with `name` (or MXNet's default)."""
    x, n = mx.sym.var("x"), mx.sym.var("n")
    kwargs = {} if name is None else {"name": name}
    if op == "cond":
        return [impl(mx.sym.sum(x) > 0, lambda: x * 2, lambda: x - 1, **kwargs)
                for impl in (cond, mx.sym.contrib.cond)]
    if op == "while_loop":
        return [mx.sym.Group(impl(lambda i, h: i < n, lambda i, h: ([h * 2], [i + 1, mx.sym.tanh(h)]),
                                  [mx.sym.zeros((1,)), x], max_iterations=3, **kwargs)[1])
                for impl in (while_loop, mx.sym.contrib.while_loop)]
    return [mx.sym.Group(impl(lambda row, states: (row * 2, [states[0] + row]), x, [n], **kwargs)[1])
            for impl in (foreach, mx.sym.contrib.foreach)]


@pytest.mark.parametrize("op", ["cond", "while_loop", "foreach"])
@pytest.mark.parametrize("name", [None, "gate"])
def test_subgraphs_are_named_as_mxnet_names_them(op, name):
    ours, theirs = build(op, name)
    assert subgraph_names(ours) == subgraph_names(theirs)
    expected = {"cond": ["%s_pred#", "%s_then#", "%s_else#"], "while_loop": ["%s_cond#", "%s_func#"],
                "foreach": ["%s#"]}[op]
    assert subgraph_names(ours) == {pattern % (name or op) for pattern in expected}


def test_nested_subgraphs_carry_the_enclosing_name():
    x, n = mx.sym.var("x"), mx.sym.var("n")

    def body(i, h):
        return [], [i + 1, cond(mx.sym.sum(h) > 0, lambda: h * 2, lambda: h - 1, name="inner")]

    _, (_, h) = while_loop(lambda i, h: i < n, body, [mx.sym.zeros((1,)), x], max_iterations=3,
                           name="outer")
    assert {"outer_func#$inner_pred#", "outer_func#$inner_then#",
            "outer_func#$inner_else#"} <= subgraph_names(h)


def test_a_foreach_run_as_a_while_loop_keeps_its_name():
    # A foreach carrying states whose body holds a cond runs as a while_loop (foreach.py).
    x, h0 = mx.sym.var("x"), mx.sym.var("h0")

    def body(row, states):
        return [], [cond(mx.sym.sum(row) > 0, lambda: states[0] + row, lambda: states[0] - row)]

    _, (h,) = foreach(body, x, [h0], name="scan")
    names = subgraph_names(h)
    assert {"scan_cond#", "scan_func#"} <= names, names


def test_name_is_accepted_imperatively_and_checked():
    x = nd([1.0, -2.0])
    assert cond(x.sum() < 0, lambda: x * 2, lambda: x, name="gate").asnumpy().tolist() == [2, -4]
    outs, _ = while_loop(lambda i: i < 2, lambda i: (i * 3, i + 1), nd([0]), name="loop")
    assert outs.asnumpy().ravel().tolist() == [0, 3]
    outs, _ = foreach(lambda row, s: (row + 1, s), x, [], name="scan")
    assert outs.asnumpy().ravel().tolist() == [2, -1]
    for bad in (3, "", None):
        with pytest.raises(TypeError, match="name must be a non-empty str"):
            cond(x.sum() < 0, lambda: x, lambda: x, name=bad)
        with pytest.raises(TypeError, match="name must be a non-empty str"):
            foreach(lambda row, s: (row, s), x, [], name=bad)
        with pytest.raises(TypeError, match="name must be a non-empty str"):
            while_loop(lambda i: i < 2, lambda i: (i, i + 1), nd([0]), name=bad)
