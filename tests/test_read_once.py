"""read_once.py: data inputs read by several operators read once, in the planned
inference CachedOps of graphs and of the recursion engine's bodies and programs."""
import json

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd

import gluon_dyn
import recursive_programs as programs
from gluon_dyn.hybridize.passes import read_once as read_once_module
from gluon_dyn.hybridize.passes.read_once import COPY_SUFFIX, planned_op, read_once
from gluon_dyn.hybridize.recursion import execution
from recursion_twins import assert_same, pair, trees


def _gathers():
    """Three gathers of `table` at `rows` and a product with `weight` (a parameter):
    `table` and `rows` are read three times each, `weight` twice, `bias` once."""
    table, rows, weight, bias = (mx.sym.var(name) for name in ("table", "rows", "weight",
                                                                "bias"))
    parts = [mx.sym.take(table, rows + k) for k in range(3)]
    hidden = mx.sym.FullyConnected(mx.sym.concat(*parts, dim=1), weight, bias, num_hidden=4)
    again = mx.sym.FullyConnected(mx.sym.concat(*parts[::-1], dim=1), weight, no_bias=True,
                                  num_hidden=4)
    return mx.sym.Group([hidden + again, mx.sym.sum(parts[0] * parts[1], axis=1)])


def _readers(symbol):
    """{input name: the operators reading it}."""
    nodes = json.loads(symbol.tojson())["nodes"]
    found = {}
    for node in nodes:
        for entry in node["inputs"]:
            source = nodes[entry[0]]
            if source["op"] == "null":
                found.setdefault(source["name"], []).append(node["op"])
    return found


def test_each_data_input_read_by_several_operators_is_read_by_one_copy():
    symbol = _gathers()
    names = symbol.list_inputs()
    data = [names.index("table"), names.index("rows"), names.index("bias")]
    rewritten = read_once(symbol, data)
    assert rewritten.list_inputs() == names
    readers = _readers(rewritten)
    assert readers["table"] == ["_copy"] and readers["rows"] == ["_copy"]
    assert len(readers["bias"]) == 1 and readers["bias"] != ["_copy"]   # read once already
    assert readers["weight"] == ["FullyConnected"] * 2    # a parameter: not data
    assert sum(node["name"].endswith(COPY_SUFFIX)
               for node in json.loads(rewritten.tojson())["nodes"]) == 2


def test_a_graph_without_data_inputs_read_twice_is_left_as_it_is():
    x, w = mx.sym.var("x"), mx.sym.var("w")
    symbol = mx.sym.FullyConnected(mx.sym.relu(x), w, no_bias=True, num_hidden=3)
    assert read_once(symbol, [0]) is symbol


@pytest.mark.parametrize("rows", [4, 7])
def test_the_planned_op_computes_what_the_graph_computes_call_after_call(rows):
    symbol = _gathers()
    names = symbol.list_inputs()
    roles = [("data_indices", [names.index(n) for n in ("table", "rows", "bias")]),
             ("param_indices", [names.index("weight")])]
    planned, plain = planned_op(symbol, roles), mx.nd.CachedOp(symbol)
    rng = np.random.RandomState(rows)
    weight = mx.nd.array(rng.standard_normal((4, 3 * 5)).astype("float32"))
    for call in range(4):     # new data arrays every call, and a new shape at call 2
        count = rows + (3 if call >= 2 else 0)
        values = {"table": mx.nd.array(rng.standard_normal((count + 2, 5))),
                  "rows": mx.nd.array(rng.randint(0, count, size=(count,))),
                  "weight": weight, "bias": mx.nd.array(rng.standard_normal(4))}
        arguments = [values[name] for name in names]
        for got, expected in zip(planned(*arguments), plain(*arguments)):
            np.testing.assert_array_equal(got.asnumpy(), expected.asnumpy())


def test_recursion_bodies_served_by_planned_ops_match_imperative(monkeypatch):
    """Inference on new trees: the bodies' graphs on kept shapes (planned, data
    read once) serve most calls, with the outputs imperative execution gives."""
    copied = []

    def counted(symbol, data_indices):
        rewritten = read_once(symbol, data_indices)
        copied.append(rewritten is not symbol)
        return rewritten
    monkeypatch.setattr(read_once_module, "read_once", counted)    # programs' planned_op
    monkeypatch.setattr(execution, "read_once", counted)           # bodies on kept shapes
    imperative, dynamic = pair(programs.ChildSumTreeLSTM)
    stream = trees(11, 40, leaves=(1, 10), arity=3)
    for tree in stream:
        with autograd.pause():
            assert_same(imperative, dynamic, (tree,), train=False)
    report = gluon_dyn.hybridize.report(dynamic)["recursion"]
    assert report["group_by_group"]["on_kept_shapes"] > report["group_by_group"]["on_new_shapes"]
    assert sum(copied) >= 2     # the bodies' planned graphs read their arenas once
