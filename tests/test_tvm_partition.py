"""Partitioning graphs with unconvertible ops into TVM and MXNet segments."""
import mxnet as mx
import numpy as np
import pytest

from gluon_dyn import native
from tvm_bridge import build_segment, load_graph, partition
from tvm_bridge.converters import registry
from tvm_bridge.value_types import ValueType
from tvm_helpers import (assert_outputs_close, compile_module, make_inputs, run_main,
                         run_mxnet, run_plan)

S = mx.sym
x, w1, w2 = S.var("x"), S.var("w1"), S.var("w2")
SHAPES = {"x": (3, 5), "w1": (4, 5), "w2": (4, 4)}
BATCH = {"x": {0: "batch"}}


def quadratic_in_the_middle():
    """fc -> tanh -> quadratic (no converter) -> fc, plus a skip connection over it."""
    hidden = S.tanh(S.FullyConnected(x, w1, no_bias=True, num_hidden=4))
    # Named: an automatic name counts up with every graph built in the process.
    squared = S.contrib.quadratic(hidden, a=1.0, b=2.0, c=3.0, name="quadratic0")
    return S.FullyConnected(squared, w2, no_bias=True, num_hidden=4) + hidden


def assert_valid_schedule(graph, segments):
    """Each node in one segment; inputs come from variables or earlier segments; heads exist."""
    produced = {(i, 0) for i, node in enumerate(graph.nodes) if node.is_variable}
    seen = []
    for segment in segments:
        assert all(ref in produced for ref in segment.inputs), segment
        seen.extend(segment.nodes)
        produced.update(segment.outputs)
    assert sorted(seen) == [i for i, node in enumerate(graph.nodes) if not node.is_variable]
    assert all(ref in produced for ref in graph.heads)


def check_segments_match_mxnet(symbol, shapes, symbolic_dims=None, sizes=(3,), special=None):
    graph = load_graph(symbol)
    segments = partition(graph, shapes, symbolic_dims=symbolic_dims)
    assert_valid_schedule(graph, segments)
    for size in sizes:
        run_shapes = dict(shapes, x=(size,) + shapes["x"][1:])
        inputs = make_inputs(symbol, run_shapes, special=special, seed=size)
        assert_outputs_close(run_plan(symbol, inputs, shapes, symbolic_dims=symbolic_dims),
                             run_mxnet(symbol, inputs))
    return segments


def test_unsupported_op_in_the_middle_splits_tvm_mxnet_tvm():
    segments = check_segments_match_mxnet(quadratic_in_the_middle(), SHAPES)
    assert [s.kind for s in segments] == ["tvm", "mxnet", "tvm"]
    reason = "op '_contrib_quadratic' (quadratic0): op '_contrib_quadratic' has no converter"
    assert segments[1].reasons == [reason]
    assert segments[0].reasons == [reason] and segments[2].reasons == [reason]


def test_symbolic_batch_crosses_an_mxnet_segment():
    segments = check_segments_match_mxnet(quadratic_in_the_middle(), SHAPES, BATCH, sizes=(2, 6))
    last = segments[2]
    assert ValueType(("batch", 4), "float32") in last.input_types


def raise_type_error(ctx, node, args):
    raise TypeError("a converter bug")


def test_a_converter_that_raises_is_a_failure_not_an_unsupported_op(monkeypatch):
    """Its op runs in MXNet, as an op with no converter does, but the segment names
    the failure (SegmentedGraph reports it: test_tvm_segmented.py)."""
    monkeypatch.setitem(registry._CONVERTERS, "tanh", raise_type_error)
    graph = load_graph(quadratic_in_the_middle())
    segments = partition(graph, SHAPES)
    assert_valid_schedule(graph, segments)
    assert [(s.kind, s.failure) for s in segments] == [
        ("tvm", ""), ("mxnet", "TypeError: a converter bug"), ("mxnet", ""), ("tvm", "")]
    assert "converter failed: TypeError: a converter bug" in segments[1].reasons[0]
    assert segments[2].reasons[0].endswith("has no converter")


def test_gluon_dyn_assert_runs_in_mxnet_between_tvm_segments():
    pred = S.sum(S.abs(x)) > -1.0  # always true
    _, (checked,) = native.assert_true(S, pred, S.exp(x), message="never fails")
    symbol = S.FullyConnected(checked, w1, no_bias=True, num_hidden=4)
    segments = check_segments_match_mxnet(symbol, {"x": (3, 5), "w1": (4, 5)})
    assert [s.kind for s in segments] == ["tvm", "mxnet", "tvm"]
    assert "must raise in MXNet" in segments[1].reasons[0]


def test_a_failing_assert_raises_from_its_mxnet_segment():
    _, (checked,) = native.assert_true(S, S.sum(x) > 1e9, S.exp(x), message="too small")
    symbol = checked * 2
    inputs = {"x": np.ones((2, 2), "float32")}
    with pytest.raises(mx.MXNetError, match="too small"):
        run_plan(symbol, inputs, {"x": (2, 2)})


def test_independent_work_is_not_split_by_an_mxnet_op():
    """exp(x) and sin(x) do not depend on the quadratic: both land in the first TVM segment."""
    early = S.exp(x)
    squared = S.contrib.quadratic(early, a=1.0)
    symbol = S.Group([squared * S.sin(x), early + 1])
    segments = check_segments_match_mxnet(symbol, {"x": (3, 5)})
    assert [s.kind for s in segments] == ["tvm", "mxnet", "tvm"]
    graph = load_graph(symbol)
    first_ops = sorted(graph.nodes[i].op for i in segments[0].nodes)
    assert first_ops == ["_plus_scalar", "exp", "sin"]


def test_parallel_mxnet_ops_and_graph_inputs_as_outputs():
    left = S.contrib.quadratic(x, a=2.0)
    right = S.contrib.quadratic(S.exp(x), b=1.0)
    symbol = S.Group([left + right, x])
    segments = check_segments_match_mxnet(symbol, {"x": (3, 5)}, BATCH, sizes=(3, 4))
    # The first quadratic needs nothing converted, so it runs first.
    assert [s.kind for s in segments] == ["mxnet", "tvm", "mxnet", "tvm"]


def test_fully_convertible_graph_is_one_segment_without_reasons():
    symbol = S.relu(S.FullyConnected(x, w1, no_bias=True, num_hidden=4))
    segments = check_segments_match_mxnet(symbol, {"x": (3, 5), "w1": (4, 5)})
    assert [(s.kind, s.reasons) for s in segments] == [("tvm", [])]


def test_segment_module_serves_new_weights():
    """Weights are inputs of the compiled function, not constants baked in."""
    symbol = S.FullyConnected(x, w1, no_bias=True, num_hidden=4)
    shapes = {"x": (3, 5), "w1": (4, 5)}
    graph = load_graph(symbol)
    (segment,) = partition(graph, shapes)
    mod, input_order, _ = build_segment(graph, segment, shapes)
    vm = compile_module(mod)
    names = [graph.nodes[i].name for i, _ in input_order]
    for seed in (1, 2):
        inputs = make_inputs(symbol, shapes, seed=seed)
        assert_outputs_close(run_main(vm, [inputs[n] for n in names]),
                             run_mxnet(symbol, inputs))


def test_mxnet_segment_symbol_names_its_inputs():
    graph = load_graph(quadratic_in_the_middle())
    mxnet_segment = partition(graph, SHAPES)[1]
    symbol = mxnet_segment.to_symbol(graph)
    (producer, _), = mxnet_segment.inputs
    expected = [graph.nodes[producer].name + "_output0"]
    assert symbol.list_inputs() == mxnet_segment.input_names(graph) == expected
    assert len(symbol.list_outputs()) == len(mxnet_segment.outputs) == 1


def test_bad_arguments_name_their_cause():
    graph = load_graph(quadratic_in_the_middle())
    with pytest.raises(ValueError, match="'y', which is not an input"):
        partition(graph, SHAPES, symbolic_dims={"y": {0: "batch"}})
    with pytest.raises(ValueError, match="input_shapes names z"):
        partition(graph, dict(SHAPES, z=(1,)))
    with pytest.raises(ValueError, match="shape of input 'x' is neither given nor inferable"):
        partition(graph, {"w1": (4, 5), "w2": (4, 4)})
    with pytest.raises(ValueError, match="runs in MXNet"):
        build_segment(graph, partition(graph, SHAPES)[1], SHAPES)


def test_load_graph_accepts_symbol_json_text_and_file(tmp_path):
    symbol = S.BatchNorm(S.FullyConnected(x, w1, no_bias=True, num_hidden=4), name="bn")
    path = tmp_path / "net-symbol.json"
    path.write_text(symbol.tojson())
    for source in (symbol, symbol.tojson(), str(path)):
        graph = load_graph(source)
        assert graph.arg_names == symbol.list_arguments()
        assert graph.aux_names == ["bn_moving_mean", "bn_moving_var"]
        fc, bn = graph.nodes[2], graph.nodes[-1]
        assert (fc.op, fc.attrs["num_hidden"], fc.inputs) == ("FullyConnected", "4", [(0, 0), (1, 0)])
        assert (bn.op, bn.num_outputs, graph.heads) == ("BatchNorm", 3, [(len(graph.nodes) - 1, 0)])
    with pytest.raises(TypeError, match="load_graph expects"):
        load_graph(42)
    with pytest.raises(ValueError, match="not valid JSON"):
        load_graph("{not json")
    with pytest.raises(ValueError, match="neither JSON text nor a file"):
        load_graph(str(tmp_path / "missing.json"))


def test_load_graph_keeps_control_flow_bodies_as_graphs():
    def body(step, states):
        new = step + states[0]
        return new, [new]

    outputs, _ = S.contrib.foreach(body, x, [S.var("h")])
    (loop,) = [node for node in load_graph(outputs).nodes if not node.is_variable]
    assert loop.op == "_foreach" and loop.num_outputs == 2
    (body_graph,) = loop.subgraphs
    # MXNet copies an output that is also a state.
    assert [node.op for node in body_graph.nodes if not node.is_variable] == ["elemwise_add", "_copy"]
    assert len(body_graph.heads) == 2


def test_foreach_over_a_symbolic_length_runs_in_mxnet():
    def body(step, states):
        new = S.tanh(step + states[0])
        return new, [new]

    outputs, _ = S.contrib.foreach(body, S.exp(x), [S.var("h")])
    symbol = S.relu(outputs)
    shapes = {"x": (3, 2, 5), "h": (2, 5)}
    segments = check_segments_match_mxnet(symbol, shapes, {"x": {0: "steps"}}, sizes=(3, 4))
    assert [s.kind for s in segments] == ["tvm", "mxnet", "tvm"]
    assert "not static" in segments[1].reason


def test_mxnet_segment_keeps_auxiliary_states():
    """BatchNorm with output_mean_var does not convert; its moving stats stay aux inputs."""
    normed = S.BatchNorm(S.exp(x), output_mean_var=True, fix_gamma=False, name="bn")[0]
    symbol = normed * 2
    graph = load_graph(symbol)
    positive = {"bn_moving_var": lambda shape, rng: rng.uniform(0.5, 2, shape).astype("float32")}
    segments = check_segments_match_mxnet(symbol, {"x": (3, 4)}, special=positive)
    assert [s.kind for s in segments] == ["tvm", "mxnet", "tvm"]
    assert segments[1].to_symbol(graph).list_auxiliary_states() == [
        "bn_moving_mean", "bn_moving_var"]
