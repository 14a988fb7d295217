"""Tests for the C++ operators gluon_dyn_assert and gluon_dyn_grad_tie."""
import importlib
import json
import os
import shutil
import subprocess
import sys
import textwrap

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon
from mxnet.base import MXNetError

from gluon_dyn import native

ALL_DTYPES = ["float32", "float64", "float16", "uint8", "int8", "int32", "int64"]
TRICKY_MESSAGE = 'x.shape[0] == 3: "batch" isn\'t 3 at model.py:42 {k=v}'


@pytest.fixture(autouse=True)
def engine_is_clean():
    """Fails a test that leaves an unread operator error behind.

    MXNet raises an engine error once, at the next wait; an error left unread
    here would surface in whichever test waits next.
    """
    yield
    mx.nd.waitall()


def expect_assert_error(read, message):
    with pytest.raises(MXNetError) as info:
        read()
    assert native.ASSERT_PREFIX + message in str(info.value)
    return str(info.value)


def nd(values, dtype="float32"):
    return mx.nd.array(np.array(values), dtype=dtype)


# --------------------------------------------------------------- library ---

def test_library_path_is_absolute_and_built():
    assert os.path.isabs(native.LIBRARY_PATH)
    assert native.LIBRARY_PATH.endswith(os.path.join("gluon_dyn", "_lib", "libgluon_dyn_ops.so"))
    assert os.path.isfile(native.LIBRARY_PATH)


def test_ops_registered_for_nd_and_sym():
    for ns in (mx.nd, mx.sym):
        assert callable(getattr(ns, native.ASSERT_OP))
        assert callable(getattr(ns, native.GRAD_TIE_OP))


def test_loading_twice_is_harmless():
    assert native.load() == native.LIBRARY_PATH
    assert native.load() == native.LIBRARY_PATH
    reloaded = importlib.reload(native)  # resets the module flag
    reloaded.load()
    pred, (x,) = reloaded.assert_true(mx.nd, nd([1]), nd([2.0]), message="after reload")
    assert x.asnumpy().tolist() == [2.0]


def test_missing_library_raises_import_error(tmp_path):
    # A copy of the module whose _lib directory was never built.
    shutil.copy(native.__file__, tmp_path / "native.py")
    proc = subprocess.run([sys.executable, "-c", "import native"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "ImportError" in proc.stderr
    assert "pip install ." in proc.stderr


# ------------------------------------------------- assert: imperative ---

@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_assert_passes_for_nonzero_pred(dtype):
    pred = nd([1, 2, 3], dtype)
    data = nd([[1.5, -2.0], [3.0, 4.0]])
    pred_out, (data_out,) = native.assert_true(mx.nd, pred, data, message="ok")
    assert pred_out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(pred_out.asnumpy(), [1, 2, 3])
    np.testing.assert_array_equal(data_out.asnumpy(), [[1.5, -2.0], [3.0, 4.0]])


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_assert_fails_when_any_element_is_zero(dtype):
    pred = nd([1, 1, 0, 1], dtype)
    pred_out, _ = native.assert_true(mx.nd, pred, message="zero in " + dtype)
    expect_assert_error(pred_out.asnumpy, "zero in " + dtype)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_negative_zero_is_false_and_nan_is_true(dtype):
    pred_out, _ = native.assert_true(mx.nd, nd([-0.0], dtype), message="negative zero")
    expect_assert_error(pred_out.asnumpy, "negative zero")
    pred_out, _ = native.assert_true(mx.nd, nd([np.nan], dtype), message="nan")
    assert np.isnan(pred_out.asnumpy()[0])


def test_assert_without_data_returns_empty_list():
    pred_out, data_outs = native.assert_true(mx.nd, nd([1]), message="m")
    assert data_outs == []
    assert isinstance(pred_out, mx.nd.NDArray)
    assert pred_out.asnumpy().tolist() == [1.0]


def test_assert_passes_through_many_dtypes_and_shapes():
    data = [
        mx.nd.array(np.arange(24).reshape(2, 3, 4), dtype="int8"),
        mx.nd.array([7.25], dtype="float64"),
        mx.nd.array(np.arange(6).reshape(6, 1), dtype="int64"),
        mx.nd.array([[0.5, 1.5]], dtype="float16"),
        mx.nd.array([255, 0], dtype="uint8"),
    ]
    pred_out, outs = native.assert_true(mx.nd, nd([1], "int32"), *data, message="m")
    assert len(outs) == len(data)
    for src, out in zip(data, outs):
        assert out.shape == src.shape
        assert out.dtype == src.dtype
        np.testing.assert_array_equal(out.asnumpy(), src.asnumpy())


def test_assert_outputs_are_copies():
    pred, data = nd([1, 1]), nd([3.0, 4.0])
    pred_out, (data_out,) = native.assert_true(mx.nd, pred, data, message="m")
    data_out[:] = 0
    pred_out[:] = 5
    assert data.asnumpy().tolist() == [3.0, 4.0]
    assert pred.asnumpy().tolist() == [1.0, 1.0]


def test_empty_pred_counts_as_true():
    # Legacy shape semantics cannot express size-0 arrays; numpy semantics can.
    with mx.util.np_shape(True):
        pred = mx.nd.zeros((0,))
        pred_out, (data_out,) = native.assert_true(mx.nd, pred, nd([4.0]), message="m")
        assert pred_out.shape == (0,)
        assert data_out.asnumpy().tolist() == [4.0]


def test_failure_message_is_kept_verbatim():
    pred_out, (x,) = native.assert_true(mx.nd, nd([0]), nd([1.0]), message=TRICKY_MESSAGE)
    expect_assert_error(x.asnumpy, TRICKY_MESSAGE)


def test_failure_surfaces_at_waitall():
    native.assert_true(mx.nd, nd([0]), message="seen by waitall")
    expect_assert_error(mx.nd.waitall, "seen by waitall")


def test_downstream_read_raises():
    _, (x,) = native.assert_true(mx.nd, nd([0]), nd([1.0, 2.0]), message="downstream")
    y = (x * 2).sum()
    expect_assert_error(y.asscalar, "downstream")


def test_process_keeps_working_after_failure():
    _, (x,) = native.assert_true(mx.nd, nd([1, 0]), nd([1.0]), message="first failure")
    expect_assert_error(x.asnumpy, "first failure")
    # The engine reports a failure once; nothing is left pending afterwards.
    mx.nd.waitall()
    assert (mx.nd.ones((2, 2)) * 3).sum().asscalar() == 12.0
    pred_out, (x,) = native.assert_true(mx.nd, nd([1, 1]), nd([5.0]), message="later")
    assert x.asnumpy().tolist() == [5.0]
    assert pred_out.asnumpy().tolist() == [1.0, 1.0]


def test_error_text_holds_only_the_latest_failure():
    _, (x,) = native.assert_true(mx.nd, nd([0]), nd([1.0]), message="older cause")
    expect_assert_error(x.asnumpy, "older cause")
    _, (x,) = native.assert_true(mx.nd, nd([0]), nd([1.0]), message="newer cause")
    text = expect_assert_error(x.asnumpy, "newer cause")
    assert "older cause" not in text


def test_failure_raises_at_call_under_naive_engine(tmp_path):
    script = textwrap.dedent("""
        import mxnet as mx
        from mxnet.base import MXNetError
        from gluon_dyn import native
        try:
            native.assert_true(mx.nd, mx.nd.array([0]), message="naive engine")
        except MXNetError as err:
            assert native.ASSERT_PREFIX + "naive engine" in str(err), str(err)
            print("RAISED_AT_CALL")
        print(native.assert_true(mx.nd, mx.nd.array([1]), mx.nd.array([3.0]),
                                 message="ok")[1][0].asnumpy().tolist())
    """)
    env = dict(os.environ, MXNET_ENGINE_TYPE="NaiveEngine")
    root = os.path.dirname(os.path.dirname(os.path.abspath(native.__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["RAISED_AT_CALL", "[3.0]"]


def test_unsupported_dtype_is_rejected_at_call():
    # bool cannot cross lib_api; type inference rejects it before the op runs.
    with pytest.raises(MXNetError, match="unsupported dtype"):
        native.assert_true(mx.nd, mx.nd.array([1], dtype=np.bool_), message="m")


def test_num_data_must_match_inputs():
    with pytest.raises(MXNetError):
        mx.nd.gluon_dyn_assert(nd([1]), nd([1.0]), nd([2.0]), num_data=1, message="m")
    with pytest.raises(MXNetError, match="non-negative integer"):
        mx.nd.gluon_dyn_assert(nd([1]), num_data="x", message="m")


def test_helper_argument_checks():
    with pytest.raises(TypeError):
        native.assert_true(mx.nd, nd([1]), nd([1.0]), message=3)
    with pytest.raises(TypeError):
        native.assert_true(mx.sym, nd([1]), message="F does not match NDArray input")
    with pytest.raises(TypeError):
        native.assert_true(mx.nd, mx.sym.var("p"), nd([1.0]), message="mixed")


# --------------------------------------------------- assert: autograd ---

def test_assert_backward_routes_data_gradients():
    pred = nd([2.0, 3.0])
    a = nd([[1.0, 2.0], [3.0, 4.0]])
    b = nd([5.0], "float64")
    for arr in (pred, a, b):
        arr.attach_grad()
    pred.grad[:] = 7  # must be overwritten with zeros
    with autograd.record():
        p_out, (a_out, b_out) = native.assert_true(mx.nd, pred, a, b, message="m")
        loss = ((p_out * 10).sum() + (a_out * a_out).sum()
                + mx.nd.cast((b_out * 4).sum(), "float32"))
    loss.backward()
    np.testing.assert_array_equal(pred.grad.asnumpy(), [0.0, 0.0])
    np.testing.assert_array_equal(a.grad.asnumpy(), [[2.0, 4.0], [6.0, 8.0]])
    np.testing.assert_array_equal(b.grad.asnumpy(), [4.0])
    assert b.grad.dtype == np.float64


def test_assert_failure_under_autograd():
    x = nd([1.0, 2.0])
    x.attach_grad()
    with autograd.record():
        _, (y,) = native.assert_true(mx.nd, nd([0]), x, message="under autograd")
        loss = (y * 3).sum()
    loss.backward()
    expect_assert_error(x.grad.asnumpy, "under autograd")
    # Recording and backward still work afterwards.
    with autograd.record():
        _, (y,) = native.assert_true(mx.nd, nd([1]), x, message="m")
        loss = (y * 3).sum()
    loss.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), [3.0, 3.0])


def test_assert_backward_accumulates_with_grad_req_add():
    x = nd([1.0, 2.0])
    x.attach_grad(grad_req="add")
    for _ in range(2):
        with autograd.record():
            _, (y,) = native.assert_true(mx.nd, nd([1]), x, message="m")
            loss = (y * 5).sum()
        loss.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), [10.0, 10.0])


# -------------------------------------------------- assert: HybridBlock ---

class AssertBlock(gluon.HybridBlock):
    """Checks pred and returns only a function of the passed-through data."""

    def __init__(self, message, **kwargs):
        super().__init__(**kwargs)
        self.message = message

    def hybrid_forward(self, F, pred, x):
        _, (x,) = native.assert_true(F, pred, x, message=self.message)
        return x * 3


@pytest.mark.parametrize("hybridize_kwargs", [{}, {"static_alloc": True, "static_shape": True}])
def test_assert_in_hybridized_block(hybridize_kwargs):
    net = AssertBlock(TRICKY_MESSAGE)
    net.hybridize(**hybridize_kwargs)
    x = nd([1.0, 2.0])
    np.testing.assert_array_equal(net(nd([1, 1]), x).asnumpy(), [3.0, 6.0])
    out = net(nd([1, 0]), x)
    expect_assert_error(out.asnumpy, TRICKY_MESSAGE)
    np.testing.assert_array_equal(net(nd([1, 1]), nd([4.0, 5.0])).asnumpy(), [12.0, 15.0])


def test_assert_hybridized_backward_matches_imperative():
    grads = []
    for hybridize in (False, True):
        net = AssertBlock("m")
        if hybridize:
            net.hybridize()
        x = nd([[1.0, -2.0], [3.0, 0.5]])
        x.attach_grad()
        with autograd.record():
            loss = (net(nd([1], "int64"), x) ** 2).sum()
        loss.backward()
        grads.append(x.grad.asnumpy())
    np.testing.assert_allclose(grads[0], 18 * np.array([[1.0, -2.0], [3.0, 0.5]]))
    np.testing.assert_array_equal(grads[0], grads[1])


def test_assert_symbol_outputs_and_inference():
    pred, a, b = mx.sym.var("pred"), mx.sym.var("a"), mx.sym.var("b")
    p_out, (a_out, b_out) = native.assert_true(mx.sym, pred, a, b, message="m")
    group = mx.sym.Group([p_out, a_out, b_out])
    assert len(group.list_outputs()) == 3
    _, out_shapes, _ = group.infer_shape(pred=(1,), a=(2, 3), b=(4,))
    assert out_shapes == [(1,), (2, 3), (4,)]
    _, out_types, _ = group.infer_type(pred=np.uint8, a=np.float64, b=np.int32)
    assert out_types == [np.uint8, np.float64, np.int32]
    p_only, data_outs = native.assert_true(mx.sym, pred, message="m")
    assert data_outs == [] and len(p_only.list_outputs()) == 1


def test_exported_graph_contains_assert(tmp_path):
    net = AssertBlock(TRICKY_MESSAGE)
    net.hybridize()
    net(nd([1]), nd([1.0, 2.0]))
    prefix = str(tmp_path / "model")
    net.export(prefix)
    with open(prefix + "-symbol.json") as f:
        graph = json.load(f)
    nodes = [n for n in graph["nodes"] if n["op"] == native.ASSERT_OP]
    assert len(nodes) == 1
    assert nodes[0]["attrs"] == {"message": TRICKY_MESSAGE, "num_data": "1"}
    # The exported graph still checks once loaded back.
    loaded = gluon.SymbolBlock.imports(prefix + "-symbol.json", ["data0", "data1"])
    np.testing.assert_array_equal(loaded(nd([1]), nd([2.0, 3.0])).asnumpy(), [6.0, 9.0])
    expect_assert_error(loaded(nd([0]), nd([2.0, 3.0])).asnumpy, TRICKY_MESSAGE)


# ------------------------------------------------------------ grad_tie ---

def test_grad_tie_helper_shortcuts():
    x = nd([1.0])
    assert native.grad_tie(mx.nd, [], [x]) == []
    out = native.grad_tie(mx.nd, [x], [])
    assert len(out) == 1 and out[0] is x
    s = mx.sym.var("s")
    assert native.grad_tie(mx.sym, (s,), ())[0] is s


def test_grad_tie_forward_is_identity_on_tied():
    tied = [nd([[1.0, 2.0]]), mx.nd.array([3, 4, 5], dtype="int64")]
    anchors = [mx.nd.array([9], dtype="int32"), nd([0.5], "float16"), nd([1.0, 2.0])]
    outs = native.grad_tie(mx.nd, tied, anchors)
    assert len(outs) == 2
    for src, out in zip(tied, outs):
        assert out.shape == src.shape and out.dtype == src.dtype
        np.testing.assert_array_equal(out.asnumpy(), src.asnumpy())
    outs[0][:] = 0
    assert tied[0].asnumpy().tolist() == [[1.0, 2.0]]


def test_grad_tie_backward_mixed_dtypes():
    x = nd([1.0, 2.0, 3.0])
    anchor_int = mx.nd.array([5, 6], dtype="int32")
    anchor_f64 = nd([[1.0, 2.0]], "float64")
    for arr in (x, anchor_int, anchor_f64):
        arr.attach_grad()
    anchor_int.grad[:] = 7  # must be overwritten with exact zeros
    anchor_f64.grad[:] = 7
    with autograd.record():
        (y,) = native.grad_tie(mx.nd, [x], [anchor_int, anchor_f64])
        loss = (y * nd([2.0, 3.0, 4.0])).sum()
    loss.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), [2.0, 3.0, 4.0])
    assert anchor_int.grad.dtype == np.int32
    np.testing.assert_array_equal(anchor_int.grad.asnumpy(), [0, 0])
    np.testing.assert_array_equal(anchor_f64.grad.asnumpy(), [[0.0, 0.0]])


def test_grad_tie_several_tied():
    a, b = nd([1.0, 2.0]), nd([3.0], "float64")
    anchor = nd([4.0])
    for arr in (a, b, anchor):
        arr.attach_grad()
    with autograd.record():
        ya, yb = native.grad_tie(mx.nd, [a, b], [anchor])
        loss = ((ya * 5).sum() + mx.nd.cast((yb * 7).sum(), "float32")
                + (anchor * 11).sum())
    loss.backward()
    np.testing.assert_array_equal(a.grad.asnumpy(), [5.0, 5.0])
    np.testing.assert_array_equal(b.grad.asnumpy(), [7.0])
    # The tie adds exactly zero to the anchor's gradient from its other use.
    np.testing.assert_array_equal(anchor.grad.asnumpy(), [11.0])


def test_grad_tie_gradients_when_some_inputs_need_none():
    x = nd([1.0, 2.0])  # no gradient requested for the tied input
    anchor = nd([3.0, 4.0])
    anchor.attach_grad()
    with autograd.record():
        (y,) = native.grad_tie(mx.nd, [x], [anchor])
        loss = (y * anchor).sum()
    loss.backward()
    np.testing.assert_array_equal(anchor.grad.asnumpy(), [1.0, 2.0])

    x.attach_grad()
    free_anchor = nd([5.0])  # no gradient requested for the anchor
    with autograd.record():
        (y,) = native.grad_tie(mx.nd, [x], [free_anchor])
        loss = (y * 3).sum()
    loss.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), [3.0, 3.0])


def test_grad_tie_same_array_tied_and_anchor():
    x = nd([1.0, 2.0])
    x.attach_grad()
    with autograd.record():
        (y,) = native.grad_tie(mx.nd, [x], [x])
        loss = (y * 5).sum()
    loss.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), [5.0, 5.0])


def test_grad_tie_backward_accumulates_with_grad_req_add():
    x, anchor = nd([1.0, 2.0]), nd([1.0])
    x.attach_grad(grad_req="add")
    anchor.attach_grad()
    for _ in range(2):
        with autograd.record():
            (y,) = native.grad_tie(mx.nd, [x], [anchor])
            loss = (y * 5).sum()
        loss.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), [10.0, 10.0])


def test_grad_tie_errors():
    with pytest.raises(MXNetError, match="num_tied"):
        mx.nd.gluon_dyn_grad_tie(nd([1.0]), nd([2.0]))
    with pytest.raises(MXNetError, match="at least 1"):
        mx.nd.gluon_dyn_grad_tie(nd([1.0]), num_tied=0, num_anchors=1)
    with pytest.raises(MXNetError, match="unsupported dtype"):
        native.grad_tie(mx.nd, [nd([1.0])], [mx.nd.array([1], dtype=np.bool_)])
    with pytest.raises(TypeError):
        native.grad_tie(mx.nd, [nd([1.0])], [mx.sym.var("a")])


class TieBlock(gluon.HybridBlock):
    """Ties x to an int32 anchor and a float64 anchor, like a loop init."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.weight = self.params.get("weight", shape=(3,), init=mx.init.Constant(2.0))

    def hybrid_forward(self, F, x, anchor_int, anchor_f64, weight):
        (y,) = native.grad_tie(F, [x], [anchor_int, anchor_f64])
        return y * weight


def test_grad_tie_hybridized_matches_imperative():
    results = []
    for hybridize in (False, True):
        net = TieBlock()
        net.initialize()
        if hybridize:
            net.hybridize()
        x = nd([1.0, 2.0, 3.0])
        anchor_int = mx.nd.array([4, 5], dtype="int32")
        anchor_f64 = nd([6.0], "float64")
        for arr in (x, anchor_int, anchor_f64):
            arr.attach_grad()
        anchor_int.grad[:] = 9
        anchor_f64.grad[:] = 9
        with autograd.record():
            out = net(x, anchor_int, anchor_f64)
            loss = (out * nd([1.0, 10.0, 100.0])).sum()
        loss.backward()
        results.append([out.asnumpy(), x.grad.asnumpy(), anchor_int.grad.asnumpy(),
                        anchor_f64.grad.asnumpy(), net.weight.grad().asnumpy()])
    imperative, hybridized = results
    np.testing.assert_array_equal(imperative[0], [2.0, 4.0, 6.0])
    np.testing.assert_array_equal(imperative[1], [2.0, 20.0, 200.0])
    np.testing.assert_array_equal(imperative[2], [0, 0])
    np.testing.assert_array_equal(imperative[3], [0.0])
    np.testing.assert_array_equal(imperative[4], [1.0, 20.0, 300.0])
    for a, b in zip(imperative, hybridized):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def test_grad_tie_symbol_outputs_and_inference():
    x, y, a = mx.sym.var("x"), mx.sym.var("y"), mx.sym.var("a")
    outs = native.grad_tie(mx.sym, [x, y], [a])
    assert len(outs) == 2
    group = mx.sym.Group(outs)
    _, out_shapes, _ = group.infer_shape(x=(2, 3), y=(5,), a=(7, 1))
    assert out_shapes == [(2, 3), (5,)]
    _, out_types, _ = group.infer_type(x=np.float32, y=np.int8, a=np.int32)
    assert out_types == [np.float32, np.int8]
    node = json.loads(group.tojson())["nodes"][-1]
    assert node["op"] == native.GRAD_TIE_OP
    assert node["attrs"] == {"num_tied": "2", "num_anchors": "1"}
