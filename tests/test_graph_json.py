"""graph_json's questions about Symbols, against the JSON they are answered from."""
import json

import mxnet as mx

from gluon_dyn import graph_json


def _json_answer(symbol, ops):
    return any(node["op"] in ops for node in json.loads(symbol.tojson())["nodes"])


def test_top_level_ops_are_read_without_subgraphs_as_the_json_gives_them():
    x, s = mx.sym.var("x"), mx.sym.var("s")
    masked, _ = mx.sym.contrib.foreach(
        lambda d, state: (mx.sym.contrib.boolean_mask(d, d > 0), state), x, [s])
    _, (looped,) = mx.sym.contrib.while_loop(lambda v: v.sum() < 3, lambda v: (None, [v + 1]),
                                             [x], max_iterations=4)
    named = mx.sym.relu(x, name="Op:_cond")   # a name cannot pose as an operator
    for symbol in (mx.sym.relu(masked) + 1, looped * 2, named,
                   mx.sym.contrib.boolean_mask(x, x > 0)):
        for ops in (graph_json.UNINFERABLE_OPS, ("relu",), ("_foreach",)):
            assert graph_json.holds_ops(symbol, ops, nested=False) == _json_answer(symbol, ops)
    # Inside the foreach's body only: nested=False does not see it, nested=True does.
    foreach_output = mx.sym.relu(masked)
    assert not graph_json.holds_ops(foreach_output, graph_json.UNINFERABLE_OPS, nested=False)
    assert graph_json.holds_ops(foreach_output, graph_json.UNINFERABLE_OPS)
