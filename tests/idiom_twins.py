"""Calls of a block run as written and through hybridize(dynamic=True), compared.

`same_as_written(make, calls, train)` makes twin blocks (dynamic_twins.twins) and
gives both the same calls: each a tuple of arguments, arrays copied for each twin.
With `train`, each call runs under autograd.record() and backward runs on the sum
of the float outputs; with `random_seed`, random operators draw the same numbers. Outputs, gradients and the Python state left on the blocks
must agree (1e-5), or both twins raise the same exception. Returns the dynamic
twin's report().
"""
import mxnet as mx
import numpy as np
from mxnet import autograd

import gluon_dyn
from dynamic_twins import assert_same, gradients, python_state, twins


def same_as_written(make, calls, train=False, random_seed=None, **options):
    """`random_seed`: both twins' random operators draw from it, renewed per call."""
    imperative, dynamic = twins(make, **options)
    for number, arguments in enumerate(calls):
        results = []
        for block in (imperative, dynamic):
            if random_seed is not None:
                mx.random.seed(random_seed + number)
            results.append(_run(block, arguments, train))
        expected, got = results
        what = "call %d" % number
        if isinstance(expected, Exception):
            assert type(got) is type(expected), "%s: %r, expected %r" % (what, got, expected)
            assert str(got).splitlines()[:1] == str(expected).splitlines()[:1], what
            continue
        assert not isinstance(got, Exception), "%s raised %r" % (what, got)
        assert_same(got, expected, what)
    return gluon_dyn.hybridize.report(dynamic)


def _run(block, arguments, train):
    arguments = tuple(_copied(value) for value in arguments)
    try:
        if not train:
            with autograd.pause():
                return block(*arguments), python_state(block)
        with autograd.record():
            outputs = block(*arguments)
            loss = sum(array.astype("float32").sum() for array in _arrays(outputs))
        loss.backward()
        return outputs, gradients(block), python_state(block)
    except Exception as error:  # noqa: BLE001 - compared with the other twin's
        return error


def _copied(value):
    if isinstance(value, mx.nd.NDArray):
        return value.copy()
    if isinstance(value, np.ndarray):
        return value.copy()
    return value


def _arrays(value):
    if isinstance(value, mx.nd.NDArray):
        return [value] if np.issubdtype(value.dtype, np.floating) else []
    if isinstance(value, (list, tuple)):
        return [array for item in value for array in _arrays(item)]
    return []


def on_graphs(report, calls):
    """Assert that graphs served the `calls` calls after profiling (no fallback)."""
    assert report["fallback"] is None and not report["internal_errors"], report["fallback"] or \
        report["internal_errors"]
    assert report["calls"]["graph"] == calls, report["calls"]


def python_reasons(report):
    """Why parts of the calls ran as Python: the block's fallback and its graph breaks."""
    reasons = [report["fallback"]] if report["fallback"] else []
    return reasons + [each["why"] for each in
                      (report["graph_segments"] or {}).get("graph_breaks", [])]
