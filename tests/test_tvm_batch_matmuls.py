"""Batching of independent same-weight matmuls (tvm_bridge/batch_matmuls.py):
which matmuls join a batch, and the compiled results against numpy."""
import numpy as np
import pytest
from tvm import relax, tirx
from tvm.relax import op as R

from tvm_bridge import compiler
from tvm_bridge.batch_matmuls import batch_shared_matmuls

STEPS, WIDTH, UNITS = 6, 5, 8


def _recurrent_module(batch=2):
    """for t: h = tanh(seq[t] @ W + h @ U): the seq[t] @ W products are independent."""
    seq = relax.Var("seq", relax.TensorType((STEPS, batch, WIDTH), "float32"))
    w = relax.Var("w", relax.TensorType((WIDTH, UNITS), "float32"))
    u = relax.Var("u", relax.TensorType((UNITS, UNITS), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [seq, w, u]):
        with bb.dataflow():
            h = bb.emit(R.zeros((batch, UNITS), "float32"))
            for t in range(STEPS):
                row = bb.emit(R.strided_slice(seq, [0], [t], [t + 1]))
                x = bb.emit(R.reshape(row, (batch, WIDTH)))
                projected = bb.emit(R.matmul(x, w))
                h = bb.emit(R.tanh(R.add(projected, bb.emit(R.matmul(h, u)))))
            out = bb.emit_output(relax.Tuple([h]))
        bb.emit_func_output(out)
    return bb.get()


def _recurrent_reference(seq, w, u):
    h = np.zeros((seq.shape[1], UNITS), "float32")
    for t in range(STEPS):
        h = np.tanh(seq[t] @ w + h @ u)
    return h


def _independent_module(count, chained=False):
    """y_i = tanh(a_i) @ W for `count` inputs (or each a_i fed the previous y)."""
    inputs = [relax.Var("a%d" % i, relax.TensorType((3, WIDTH), "float32")) for i in range(count)]
    w = relax.Var("w", relax.TensorType((WIDTH, WIDTH), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", inputs + [w]):
        with bb.dataflow():
            outputs, previous = [], None
            for a in inputs:
                lhs = bb.emit(R.tanh(a if previous is None or not chained else previous))
                previous = bb.emit(R.matmul(lhs, w))
                outputs.append(previous)
            out = bb.emit_output(relax.Tuple(outputs))
        bb.emit_func_output(out)
    return bb.get()


def _matmuls(mod):
    return sum(1 for block in mod["main"].body.blocks for binding in block.bindings
               if isinstance(binding.value, relax.Call) and binding.value.op.name == "relax.matmul")


def _random(*shape):
    return np.random.uniform(-1, 1, shape).astype("float32")


def test_the_inputs_of_all_steps_become_one_matmul_and_the_recurrence_stays():
    rewritten = batch_shared_matmuls(_recurrent_module())
    # STEPS input products -> 1; the STEPS recurrent h @ U products depend on each other.
    assert _matmuls(rewritten) == 1 + STEPS
    function = compiler.compile_module(_recurrent_module(), use_cache=False)
    seq, w, u = _random(STEPS, 2, WIDTH), _random(WIDTH, UNITS), _random(UNITS, UNITS)
    result = function(seq, w, u)[0].asnumpy()
    np.testing.assert_allclose(result, _recurrent_reference(seq, w, u), rtol=1e-5, atol=1e-5)


def test_a_symbolic_batch_dim_is_batched_and_serves_every_size():
    batch = tirx.Var("batch", "int64")
    assert _matmuls(batch_shared_matmuls(_recurrent_module(batch))) == 1 + STEPS
    function = compiler.compile_module(_recurrent_module(batch), use_cache=False)
    w, u = _random(WIDTH, UNITS), _random(UNITS, UNITS)
    for size in (1, 3):
        seq = _random(STEPS, size, WIDTH)
        np.testing.assert_allclose(function(seq, w, u)[0].asnumpy(),
                                   _recurrent_reference(seq, w, u), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("count", [3, 11])
def test_independent_inputs_of_other_origins_are_concatenated(count):
    rewritten = batch_shared_matmuls(_independent_module(count))
    # A concat of many inputs is capped (see MAX_CONCATENATED): 11 -> 8 + 3.
    assert _matmuls(rewritten) == (1 if count <= 8 else 2)
    function = compiler.compile_module(_independent_module(count), use_cache=False)
    inputs = [_random(3, WIDTH) for _ in range(count)] + [_random(WIDTH, WIDTH)]
    for result, a in zip(function(*inputs), inputs[:-1]):
        np.testing.assert_allclose(result.asnumpy(), np.tanh(a) @ inputs[-1], rtol=1e-5,
                                   atol=1e-5)


def test_a_matmul_whose_input_needs_another_is_not_batched_with_it():
    assert _matmuls(batch_shared_matmuls(_independent_module(4, chained=True))) == 4
