"""Numpy references, inputs and subprocess runs for the compile/runtime tests."""
import os
import subprocess
import sys

import mxnet as mx
import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def mlp_reference(x, w1, b1, w2, b2):
    return [np.maximum(x @ w1.T + b1, 0) @ w2.T + b2]


def lstm_reference(x, h, c, w_ih, w_hh, bias):
    for x_t in x:
        i, f, g, o = np.split(x_t @ w_ih.T + bias + h @ w_hh.T, 4, axis=1)
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
    return [h, c]


def random_inputs(signature, dims=None, seed=0):
    """MXNet arrays fitting `signature`, symbolic dims taken from `dims`."""
    rng = np.random.default_rng(seed)
    arrays = []
    for spec in signature.inputs:
        shape = [d if isinstance(d, int) else dims[d] for d in spec.shape]
        arrays.append(mx.nd.array(rng.uniform(-0.5, 0.5, shape).astype(spec.dtype)))
    return arrays


def assert_matches(outputs, expected):
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected):
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-5, atol=1e-5)


def run_python(code, env=None, unset=(), timeout=300):
    """Run `code` in a fresh interpreter from the repo root, with `env` added and the
    variables in `unset` removed; returns its stdout."""
    environment = {k: v for k, v in os.environ.items() if k not in unset}
    environment.update(env or {})
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                            text=True, timeout=timeout, env=environment)
    assert result.returncode == 0, f"subprocess failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout
