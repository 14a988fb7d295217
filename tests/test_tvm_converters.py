"""Each converter against MXNet on random inputs, with a symbolic batch dim where it applies."""
import mxnet as mx
import numpy as np
import pytest

from gluon_dyn import native
from tvm_bridge import SegmentedGraph, load_graph, partition
from tvm_helpers import (COMPILE_CACHE, assert_outputs_close, check_against_mxnet, run_mxnet,
                         uniform)

S = mx.sym
a, b, c = S.var("a"), S.var("b"), S.var("c")


def positive(shape, rng):
    return rng.uniform(0.5, 2.0, size=shape).astype("float32")


def indices(high):
    return lambda shape, rng: rng.randint(0, high, size=shape).astype("float32")


def small_ints(shape, rng):
    """Values from {-1, 0, 1}: comparisons then hit equality too."""
    return rng.randint(-1, 2, size=shape).astype("float32")


class Case:
    """A symbol over a, b, c; ``batch`` names the inputs whose dim 0 is symbolic."""

    def __init__(self, name, symbol, shapes, batch=("a",), special=None):
        self.name, self.symbol, self.shapes = name, symbol, shapes
        self.symbolic_dims = {n: {0: "batch"} for n in batch}
        self.special = special

    def __repr__(self):
        return self.name


M34 = {"a": (2, 3, 4), "b": (2, 3, 4)}
BATCH_AB = ("a", "b")
CASES = [
    # elementwise and broadcast arithmetic
    Case("add", a + b, M34, BATCH_AB),
    Case("sub", a - b, M34, BATCH_AB),
    Case("mul", a * b, M34, BATCH_AB),
    Case("div", a / b, M34, BATCH_AB, {"b": positive}),
    Case("power", S.abs(a) ** b, M34, BATCH_AB),
    Case("maximum_minimum", S.maximum(a, b) + S.minimum(a, b) * 2, M34, BATCH_AB),
    Case("broadcast_add_sub", S.broadcast_add(a, b) + S.broadcast_sub(b, a),
         {"a": (2, 3, 4), "b": (1, 3, 1)}),
    Case("broadcast_mul_div", S.broadcast_mul(a, b) + S.broadcast_div(a, b),
         {"a": (2, 3, 4), "b": (3, 1)}, special={"b": positive}),
    Case("broadcast_max_min_pow", S.broadcast_maximum(a, b) + S.broadcast_minimum(a, b)
         + S.broadcast_power(b, a), {"a": (2, 3, 4), "b": (1, 1, 4)}, special={"b": positive}),
    Case("scalars", ((((a + 2) - 3) * 4) / 5 - 0.5) + (2 - a) + 3 / (S.abs(a) + 1),
         {"a": (3, 4)}),
    Case("power_scalars", S.abs(a) ** 2.5 + 2 ** a + S.maximum(a, 0.2) + S.minimum(a, -0.2),
         {"a": (3, 4)}),
    Case("negative", S.negative(a) - a, {"a": (3, 4)}),
    Case("comparisons", S.concat(a > b, a < b, a == b, a != b, a >= b, a <= b, dim=1), M34,
         BATCH_AB, {"a": small_ints, "b": small_ints}),
    Case("broadcast_comparisons", S.concat(S.broadcast_greater(a, b), S.broadcast_lesser(a, b),
                                           S.broadcast_equal(a, b), dim=0),
         {"a": (2, 3), "b": (1, 3)}, special={"a": small_ints, "b": small_ints}),
    Case("scalar_comparisons", S.concat(a > 0, a < 0, a == 0, a != 0, a >= 1, a <= -1, dim=1),
         {"a": (3, 4)}, special={"a": small_ints}),
    Case("unary_math", S.exp(a) + S.square(a) + S.abs(a) + S.sin(a) + S.floor(a), {"a": (3, 4)}),
    Case("log_sqrt", S.log(a) + S.sqrt(a) + S.rsqrt(a), {"a": (3, 4)}, special={"a": positive}),
    Case("logical", S.concat(S.logical_not(a), S.broadcast_logical_and(a, b),
                             S.broadcast_logical_or(a, b), S.broadcast_logical_xor(a, b), dim=1),
         {"a": (3, 4), "b": (3, 4)}, BATCH_AB, {"a": small_ints, "b": small_ints}),
    Case("add_n", S.add_n(a, b, c), {"a": (3, 4), "b": (3, 4), "c": (3, 4)}, ("a", "b", "c")),
    # activations
    Case("activation", S.concat(*[S.Activation(a, act_type=t) for t in
                                  ("relu", "sigmoid", "tanh", "softrelu", "softsign")], dim=1),
         {"a": (3, 4)}),
    Case("softrelu_large", S.Activation(a * 30, act_type="softrelu"), {"a": (3, 4)}),
    Case("named_activations", S.sigmoid(a) + S.tanh(a) + S.relu(a), {"a": (3, 4)}),
    Case("leaky_relu", S.LeakyReLU(a) + S.LeakyReLU(a, slope=0.1)
         + S.LeakyReLU(a, act_type="elu", slope=0.5), {"a": (3, 4)}),
    Case("softmax", S.softmax(a) + S.softmax(a, axis=0) + S.softmax(a, temperature=2.0),
         {"a": (3, 4)}),
    Case("log_softmax", S.log_softmax(a, axis=1) + S.log_softmax(a, temperature=0.5),
         {"a": (2, 3, 4)}),
    # split, slice, concat
    Case("split", S.split(a, num_outputs=2, axis=1), {"a": (2, 4, 3)}),
    Case("split_squeeze", S.SliceChannel(a, num_outputs=3, axis=-1, squeeze_axis=True),
         {"a": (2, 4, 3)}),
    Case("split_one", S.split(a, num_outputs=1, axis=2), {"a": (2, 4, 3)}),
    Case("slice", S.slice(a, begin=(None, 1), end=(None, 3)), {"a": (2, 4, 3)}),
    Case("slice_steps", S.slice(a, begin=(None, -1, 0), end=(None, None, 3), step=(1, -2, 2)),
         {"a": (2, 5, 3)}),
    Case("slice_negative_step_defaults", S.slice(a, begin=(None, None), end=(None, None),
                                                 step=(None, -1)), {"a": (2, 5)}),
    Case("slice_axis", S.slice_axis(a, axis=1, begin=1, end=None)
         + S.slice_axis(a, axis=-2, begin=-4, end=-1), {"a": (2, 4, 4)}),
    Case("slice_axis_batch", S.slice_axis(a, axis=0, begin=0, end=-1), {"a": (3, 4)}),
    Case("concat", S.concat(a, b, dim=1) + S.Concat(b, a, dim=1), {"a": (2, 3), "b": (2, 3)},
         BATCH_AB),
    Case("stack", S.stack(a, b, axis=1) + S.transpose(S.stack(b, a, axis=-1), axes=(0, 2, 1)),
         {"a": (2, 3), "b": (2, 3)}, BATCH_AB),
    # shapes
    Case("expand_dims", S.expand_dims(a, axis=1) + S.expand_dims(a, axis=-2), {"a": (2, 3)}),
    Case("reshape_codes", S.reshape(a, shape=(0, -1)) + S.reshape(a, shape=(-1, 12))
         + S.reshape(a, shape=(0, -3)) + S.reshape(a, shape=(-2,)).reshape((0, 12)),
         {"a": (2, 3, 4)}),
    Case("reshape_split_dim", S.reshape(a, shape=(0, -4, 2, -1, 0)) + S.reshape(
        a, shape=(-1, 2, 3, 2)), {"a": (2, 6, 2)}),
    Case("reshape_merge_batch", S.reshape(a, shape=(-3, 0)), {"a": (2, 3, 4)}),
    Case("squeeze", S.squeeze(a, axis=1) + S.squeeze(S.expand_dims(a, axis=0), axis=(0, 2)),
         {"a": (2, 1, 3)}),
    Case("squeeze_all", S.squeeze(a), {"a": (1, 3, 1)}, batch=()),
    Case("transpose", S.transpose(a) + S.transpose(a, axes=(2, 1, 0)),
         {"a": (2, 3, 2)}, batch=()),
    Case("transpose_axes", S.transpose(a, axes=(0, 2, 1)) + S.swapaxes(a, dim1=1, dim2=2),
         {"a": (2, 3, 3)}),
    Case("reshape_like", S.reshape_like(a, b), {"a": (2, 6), "b": (2, 3, 2)}, BATCH_AB),
    Case("broadcast_to_like", S.broadcast_to(a, shape=(0, 3, 4)) + S.broadcast_like(a, b),
         {"a": (2, 1, 4), "b": (2, 3, 4)}, BATCH_AB),
    Case("flatten", S.Flatten(a) + S.flatten(a), {"a": (2, 3, 4)}),
    # reductions
    Case("sum_mean", S.broadcast_add(S.sum(a, axis=1), S.mean(a, axis=(1, 2), keepdims=True)
                                     .reshape((0, 1))) + S.mean(a, axis=1),
         {"a": (2, 3, 4)}),
    Case("sum_exclude", S.sum(a, axis=1, exclude=True) + S.max(a, axis=(0, 2)), {"a": (2, 3, 4)}),
    Case("max_min_prod", S.max(a, axis=-1) + S.min(a, axis=1) + S.prod(a, axis=1), {"a": (3, 4)}),
    Case("reduce_all", S.concat(S.sum(a), S.mean(a), S.max(a), S.min(a), dim=0), {"a": (3, 4)}),
    Case("argmax", S.concat(S.argmax(a, axis=1), S.argmin(a, axis=0), dim=0)
         + S.concat(*[S.argmax(a, axis=-1, keepdims=True).reshape((-1,))] * 2, dim=0),
         {"a": (4, 4)},
         batch=()),
    Case("argmax_all", S.argmax(a), {"a": (3, 4)}),
    # indexing and tensors
    Case("embedding", S.Embedding(a, b, input_dim=5, output_dim=3), {"a": (2, 4), "b": (5, 3)},
         special={"a": indices(5)}),
    Case("take", S.take(b, a) + S.take(b, a, mode="wrap"), {"a": (3,), "b": (4, 2)},
         special={"a": lambda shape, rng: rng.randint(-6, 6, size=shape).astype("float32")}),
    Case("take_axis", S.take(b, a, axis=1), {"a": (2, 3), "b": (2, 5)}, batch=("a", "b"),
         special={"a": indices(5)}),
    Case("creation", S.broadcast_add(S.zeros((1, 4)) + S.ones((1, 4)) + S.full((1, 4), 2.5)
                                     + S.reshape(S.arange(4), (1, 4))
                                     + S.reshape(S.arange(1, 3, 0.5), (1, 4)), a), {"a": (3, 4)}),
    Case("shape_array", S.shape_array(a), {"a": (3, 4)}),
    Case("arange_like", S.broadcast_add(S.broadcast_add(S.contrib.arange_like(a, axis=1), a)
                                        + S.contrib.arange_like(a, start=2, step=0.5) * a,
                                        S.expand_dims(S.contrib.arange_like(a, axis=0), axis=1)),
         {"a": (3, 4)}),
    Case("like_copy", S.zeros_like(a) + S.ones_like(a) + S.identity(a) + S.BlockGrad(a)
         + S.stop_gradient(a), {"a": (3, 4)}),
    Case("cast", S.Cast(a * 10, dtype="int32"), {"a": (3, 4)}),
    Case("cast_round_trip", S.cast(S.Cast(a, dtype="float64"), dtype="float32"), {"a": (3, 4)}),
    Case("where", S.where(a, b, c), {"a": (3, 4), "b": (3, 4), "c": (3, 4)}, ("a", "b", "c"),
         {"a": small_ints}),
    Case("where_rows", S.where(a, b, c), {"a": (3,), "b": (3, 4), "c": (3, 4)}, ("a", "b", "c"),
         {"a": small_ints}),
    Case("clip", S.clip(a, -0.3, 0.5), {"a": (3, 4)}),
    Case("dropout", S.Dropout(a, p=0.5), {"a": (3, 4)}),
    # linear algebra
    Case("fully_connected", S.FullyConnected(a, b, c, num_hidden=5), {"a": (2, 3), "b": (5, 3)}),
    Case("fully_connected_flatten", S.FullyConnected(a, b, num_hidden=5, no_bias=True),
         {"a": (2, 3, 2), "b": (5, 6)}),
    Case("fully_connected_no_flatten", S.FullyConnected(a, b, c, num_hidden=5, flatten=False),
         {"a": (2, 3, 2), "b": (5, 2)}),
    Case("dot", S.dot(a, b) + S.dot(a, c, transpose_b=True), {"a": (2, 3), "b": (3, 4),
                                                             "c": (4, 3)}),
    Case("dot_transpose_a", S.dot(b, a, transpose_a=True), {"a": (2, 4), "b": (2, 3)},
         ("a", "b")),
    Case("dot_nd", S.dot(a, b), {"a": (2, 3, 4), "b": (4, 2, 5)}),
    Case("batch_dot", S.batch_dot(a, b) + S.batch_dot(b, a, transpose_a=True, transpose_b=True),
         {"a": (2, 3, 3), "b": (2, 3, 3)}, BATCH_AB),
    # convolutional nets
    Case("convolution", S.Convolution(a, b, c, kernel=(3, 3), num_filter=4),
         {"a": (2, 2, 7, 6), "b": (4, 2, 3, 3)}),
    Case("convolution_options", S.Convolution(a, b, kernel=(3, 2), stride=(2, 1), pad=(1, 1),
                                              dilate=(1, 2), num_group=2, num_filter=4,
                                              no_bias=True),
         {"a": (2, 4, 7, 6), "b": (4, 2, 3, 2)}),
    Case("max_pool", S.Pooling(a, kernel=(2, 2), stride=(2, 2)) + S.Pooling(
        a, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max"), {"a": (2, 2, 6, 6)}),
    Case("max_pool_full", S.Pooling(a, kernel=(3, 3), stride=(2, 2), pooling_convention="full"),
         {"a": (2, 2, 6, 7)}),
    Case("avg_pool", S.concat(
        S.Pooling(a, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg"),
        S.Pooling(a, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg",
                  count_include_pad=False), dim=1), {"a": (2, 2, 7, 7)}),
    Case("avg_pool_full", S.Pooling(a, kernel=(2, 2), stride=(2, 2), pool_type="avg",
                                    pooling_convention="full"), {"a": (2, 2, 5, 5)}),
    Case("global_pool", S.Pooling(a, kernel=(1, 1), global_pool=True, pool_type="avg")
         + S.Pooling(a, kernel=(1, 1), global_pool=True), {"a": (2, 3, 4, 5)}),
    Case("batch_norm", S.BatchNorm(a, S.var("g"), S.var("be"), S.var("mm"), S.var("mv"),
                                   eps=1e-3) + S.BatchNorm(a, fix_gamma=False, name="bn2"),
         {"a": (2, 3, 4, 4)}, special={"mv": positive, "bn2_moving_var": positive}),
    Case("batch_norm_axis", S.BatchNorm(a, fix_gamma=False, use_global_stats=True, axis=-1),
         {"a": (2, 3, 4)}, special={"batchnorm0_moving_var": positive}),
]


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_converter_matches_mxnet(case):
    check_against_mxnet(case.symbol, case.shapes, case.symbolic_dims or None,
                        special=case.special)


def _foreach_rnn():
    w, h = S.var("w"), S.var("h")

    def body(step, states):
        new = S.tanh(S.FullyConnected(step, w, no_bias=True, num_hidden=4) + states[0])
        return [new, new * 2], [new]

    outputs, states = S.contrib.foreach(body, a, [h])
    return S.Group(outputs + states)


def test_foreach_unrolls_over_a_static_length():
    check_against_mxnet(_foreach_rnn(), {"a": (3, 2, 5), "h": (2, 4), "w": (4, 5)},
                        symbolic_dims={"a": {1: "batch"}, "h": {0: "batch"}})


def test_grad_tie_passes_its_tied_inputs_through():
    tied = native.grad_tie(S, [a * 2, b], [c])
    check_against_mxnet(S.Group(tied), {"a": (2, 3), "b": (2, 3), "c": (2, 3)},
                        {"a": {0: "batch"}, "b": {0: "batch"}})


def _while_loop():
    outputs, _ = S.contrib.while_loop(lambda i, s: i < 3, lambda i, s: ([s * 2], [i + 1, s + 1]),
                                      [b, a], max_iterations=4)
    return outputs[0]


UNSUPPORTED = [
    ("dropout_always", S.Dropout(a, p=0.5, mode="always"), {"a": (2, 3)}, "mode='always'"),
    ("assert", native.assert_true(S, b, a, message="m")[1][0], {"a": (2, 3), "b": (1,)},
     "must raise in MXNet"),
    ("no_converter", S.topk(a, k=1), {"a": (2, 3)}, "op 'topk' has no converter"),
    ("while_loop", _while_loop(), {"a": (2, 3), "b": (1,)}, "data-dependent"),
    ("cond_branch_without_converter", S.contrib.cond(
        S.sum(a) > 0, lambda: S.topk(a, k=1, ret_typ="value"),
        lambda: S.slice_axis(a, axis=1, begin=0, end=1)), {"a": (2, 3)},
     "op 'topk' has no converter"),
    ("reshape_reverse", S.reshape(a, shape=(-1, 0), reverse=True), {"a": (2, 3)}, "reverse"),
    ("masked_softmax", S.softmax(a, b, use_length=True), {"a": (2, 3), "b": (2,)},
     "use_length"),
    ("pooling_full_padding_window", S.Pooling(a, kernel=(2, 2), stride=(2, 2), pad=(1, 1),
                                              pooling_convention="full"), {"a": (1, 1, 5, 5)},
     "wholly in the padding"),
    ("pool_type_sum", S.Pooling(a, kernel=(2, 2), pool_type="sum"), {"a": (1, 1, 4, 4)},
     "pool_type='sum'"),
]


@pytest.mark.parametrize("name,symbol,shapes,reason", UNSUPPORTED, ids=[u[0] for u in UNSUPPORTED])
def test_unsupported_nodes_run_in_mxnet(name, symbol, shapes, reason):
    segments = partition(load_graph(symbol), shapes)
    mxnet_reasons = [r for seg in segments if seg.kind == "mxnet" for r in seg.reasons]
    assert any(reason in r for r in mxnet_reasons), mxnet_reasons


def test_a_cond_whose_branches_convert_is_a_relax_if_on_both_paths():
    symbol = S.contrib.cond(S.sum(a) > 0, lambda: S.tanh(a * 2), lambda: a - 1) + 1
    (segment,) = partition(load_graph(symbol), {"a": (2, 3)})
    assert segment.kind == "tvm" and segment.reasons == []
    # MXNet infers no shapes through _cond: the plan is built from an example array.
    plan = SegmentedGraph(symbol, ["a"], [mx.nd.ones((2, 3))], cache_dir=COMPILE_CACHE.name,
                          choose_by_measurement=False)
    assert [step.backend for step in plan.steps] == ["tvm"]
    for sign in (1, -1):
        inputs = {"a": np.abs(uniform((2, 3), seed=sign + 1)) * sign}
        assert_outputs_close([out.asnumpy() for out in plan(mx.nd.array(inputs["a"]))],
                             run_mxnet(symbol, inputs))


def test_foreach_over_a_symbolic_length_is_unsupported():
    segments = partition(load_graph(_foreach_rnn()), {"a": (3, 2, 5), "h": (2, 4), "w": (4, 5)},
                         symbolic_dims={"a": {0: "steps"}})
    assert [seg.kind for seg in segments] == ["mxnet"]
    assert "sequence length steps is not static" in segments[0].reasons[0]

