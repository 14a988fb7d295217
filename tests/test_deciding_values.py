"""Values that reach an operator deciding on them are computed as written.

equivalent_ops.py runs `tanh` and `sigmoid` as oneDNN's `Activation`, which differs
in the last bit. Where such a value reaches a comparison, an ordering or a selection
(non-maximum suppression, argmax), a branch, or an operator whose gradient takes a
path by comparing values (clip, max, pooling), one bit can change the result
entirely: those keep MXNet's own operator (graph_json.decides).
"""
import json

import mxnet as mx
import pytest

from gluon_dyn import graph_json
from gluon_dyn.hybridize.passes import equivalent_ops


def ops_after_rewrite(build):
    x = mx.sym.var("x")
    rewritten = equivalent_ops.rewritten(build(x), {"x": "float32"})
    return [node["op"] for node in json.loads(rewritten.tojson())["nodes"]]


@pytest.mark.parametrize("consumer", [
    lambda y: mx.sym.clip(y, 1e-4, 1 - 1e-4), lambda y: mx.sym.argmax(y, axis=1),
    lambda y: mx.sym.topk(y, k=1), lambda y: mx.sym.broadcast_greater(y, y * 0.5),
    lambda y: mx.sym.max(y, axis=1), lambda y: mx.sym.broadcast_maximum(y, y * 2),
    lambda y: mx.sym.contrib.box_nms(mx.sym.reshape(y, shape=(1, -1, 6))),
    lambda y: mx.sym.Pooling(mx.sym.reshape(y, shape=(1, 1, 2, 3)), kernel=(2, 2),
                             pool_type="max"),
    lambda y: mx.sym.cast(y * 4, dtype="int32")],
    ids=["clip", "argmax", "topk", "comparison", "max", "maximum", "box_nms", "pooling",
         "cast to int"])
def test_activations_deciding_a_result_stay_as_written(consumer):
    assert "sigmoid" in ops_after_rewrite(lambda x: consumer(mx.sym.sigmoid(x) * 3 + 1))


def test_activations_reaching_only_arithmetic_run_as_onednn():
    ops = ops_after_rewrite(lambda x: mx.sym.FullyConnected(mx.sym.tanh(x), num_hidden=2) +
                            mx.sym.sigmoid(x))
    assert "tanh" not in ops and "sigmoid" not in ops and ops.count("Activation") == 2


def test_numpy_interface_names_decide_too():
    assert graph_json.decides({"op": "_npi_greater_equal"})
    assert graph_json.decides({"op": "_npi_argmax"})
    assert not graph_json.decides({"op": "_npi_add"})
    assert not graph_json.decides({"op": "Cast", "attrs": {"dtype": "float16"}})
