"""Compiled Relax functions called with MXNet arrays: results, DLPack copies, signatures."""
import os

import mxnet as mx
import numpy as np
import pytest
from tvm import relax

from tvm_bridge import compiler, sample_modules
from tvm_bridge.runtime import Signature
from tvm_runtime_helpers import (assert_matches, lstm_reference, mlp_reference,
                                 random_inputs, run_python)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("tvm_cache"))


@pytest.fixture(scope="module")
def mlp(cache_dir):
    return compiler.compile_module(sample_modules.mlp(batch="batch"), cache_dir=cache_dir)


@pytest.fixture(scope="module")
def lstm(cache_dir):
    return compiler.compile_module(sample_modules.lstm(steps=5, batch=2, in_dim=8, hidden=16),
                                   cache_dir=cache_dir)


def test_mlp_with_symbolic_batch_matches_numpy_for_two_batch_sizes(mlp):
    assert mlp.signature.inputs[0].shape == ("batch", 16)
    for batch in (1, 7):
        inputs = random_inputs(mlp.signature, {"batch": batch}, seed=batch)
        outputs = mlp(*inputs)
        assert outputs[0].shape == (batch, 8)
        assert_matches(outputs, mlp_reference(*[a.asnumpy() for a in inputs]))


def test_lstm_matches_numpy(lstm):
    inputs = random_inputs(lstm.signature)
    assert_matches(lstm(*inputs), lstm_reference(*[a.asnumpy() for a in inputs]))


def test_aligned_mxnet_inputs_and_outputs_are_not_copied(mlp):
    inputs = random_inputs(mlp.signature, {"batch": 3})
    before = mlp.copies
    first = mlp(*inputs)[0]
    assert mlp.copies == before
    kept = first.asnumpy()
    mlp(*random_inputs(mlp.signature, {"batch": 3}, seed=5))
    # The output shares TVM's memory: a later call must not reuse it.
    np.testing.assert_array_equal(first.asnumpy(), kept)
    assert isinstance(first, mx.nd.NDArray)


def test_arrays_passed_again_are_read_as_they_are_now(mlp):
    """The same NDArrays at each call (parameters; inputs refilled in place):
    their views are reused, and see every MXNet write made in between."""
    inputs = random_inputs(mlp.signature, {"batch": 3})
    mlp(*inputs)
    for seed in (1, 2):
        for array, new in zip(inputs, random_inputs(mlp.signature, {"batch": 3}, seed=seed)):
            array[:] = new * 2  # pending MXNet writes when the call starts
        assert_matches(mlp(*inputs), mlp_reference(*[a.asnumpy() for a in inputs]))
    other_batch = random_inputs(mlp.signature, {"batch": 5}, seed=3)
    assert_matches(mlp(other_batch[0], *inputs[1:]),
                   mlp_reference(other_batch[0].asnumpy(), *[a.asnumpy() for a in inputs[1:]]))


def test_misaligned_and_non_contiguous_inputs_are_copied_and_correct(mlp):
    inputs = random_inputs(mlp.signature, {"batch": 3})
    # A view 5 float32 (20 bytes) into an aligned buffer.
    misaligned = mx.nd.zeros((5 + 48,))[5:].reshape((3, 16))
    misaligned[:] = inputs[0]
    strided_w1 = np.asfortranarray(inputs[1].asnumpy())
    before = mlp.copies
    outputs = mlp(misaligned, strided_w1, *inputs[2:])
    assert mlp.copies == before + 2
    assert_matches(outputs, mlp_reference(*[a.asnumpy() for a in inputs]))


def returning_its_input():
    """main(x) -> (x, x reshaped, x + 1): two outputs that may share x's memory."""
    x = relax.Var("x", relax.TensorType((3, 4), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(relax.Tuple([x, relax.op.reshape(x, (4, 3)),
                                              relax.op.add(x, relax.const(1.0))]))
        bb.emit_func_output(out)
    return bb.get()


def test_a_copied_input_a_function_returns_is_not_overwritten_by_the_next_call(cache_dir):
    """Misaligned inputs are copied into a buffer kept per input; outputs sharing it
    are copied out before the next call refills it."""
    function = compiler.compile_module(returning_its_input(), cache_dir=cache_dir)
    calls = []
    for seed in range(3):
        values = np.random.RandomState(seed).rand(3, 4).astype(np.float32)
        misaligned = mx.nd.zeros((5 + 12,))[5:].reshape((3, 4))
        misaligned[:] = values
        calls.append((values, function(misaligned)))
    assert function.copies == 3
    assert len(function._staging) == 1     # one buffer, refilled at each call
    for values, (same, reshaped, plus_one) in calls:
        np.testing.assert_array_equal(same.asnumpy(), values)
        np.testing.assert_array_equal(reshaped.asnumpy(), values.reshape(4, 3))
        np.testing.assert_allclose(plus_one.asnumpy(), values + 1, rtol=1e-6)


@pytest.mark.parametrize("change, message", [
    (lambda xs: xs[:4], "expected 5 inputs (x, w1, b1, w2, b2), got 4"),
    (lambda xs: [xs[0], mx.nd.zeros((64, 16))] + xs[2:], "input 1 'w1' dim 0: expected 32, got 64"),
    (lambda xs: xs[:2] + [xs[2].astype("float64")] + xs[3:],
     "input 2 'b1': expected dtype float32, got float64"),
    (lambda xs: [xs[0].reshape((-1,))] + xs[1:], "input 0 'x': expected 2 dims"),
    (lambda xs: [[1.0]] + xs[1:], "input 0 'x': expected an mxnet NDArray or numpy array"),
])
def test_signature_errors_name_the_input(mlp, change, message):
    inputs = random_inputs(mlp.signature, {"batch": 2})
    with pytest.raises((TypeError, ValueError), match=message.replace("(", r"\(").replace(")", r"\)")):
        mlp(*change(inputs))


def test_a_symbolic_dim_must_agree_across_inputs(lstm):
    signature = Signature.from_json({"inputs": [
        {"name": "x", "shape": ["batch", 4], "dtype": "float32"},
        {"name": "h", "shape": ["batch", 2], "dtype": "float32"}], "num_outputs": 1})
    with pytest.raises(ValueError, match="input 1 'h' dim 0: 'batch' is 3 in input 0 'x', got 5"):
        signature.check([np.zeros((3, 4), "float32"), np.zeros((5, 2), "float32")])


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_mxnet_threads_keep_every_cpu_after_a_tvm_call():
    """TVM's default thread binding would pin this thread, and every MXNet engine
    thread started after it, to CPU 0."""
    report = run_python("""
import os, threading
import mxnet as mx
import tvm
from tvm_bridge import compiler, sample_modules
from tvm_runtime_helpers import random_inputs
cpus = os.sched_getaffinity(0)
fn = compiler.compile_module(sample_modules.mlp(), use_cache=False)
fn(*random_inputs(fn.signature))
tvm.runtime.num_threads()  # starts TVM's thread pool if the call above did not
seen = []
def mxnet_work():
    (mx.nd.ones((64, 64)) * 2).wait_to_read()
    seen.append(os.sched_getaffinity(0))
worker = threading.Thread(target=mxnet_work)
worker.start(); worker.join()
print(len(cpus), len(os.sched_getaffinity(0)), len(seen[0]), os.environ["TVM_NUM_THREADS"])
""", env={"PYTHONPATH": "tests"}, unset=("TVM_NUM_THREADS", "TVM_BIND_THREADS"))
    cpus, main_thread, new_thread, threads = report.split()
    assert main_thread == new_thread == cpus
    assert threads == cpus  # TVM's pool has a thread per CPU; binding is off
