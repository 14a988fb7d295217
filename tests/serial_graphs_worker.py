"""Runs for tests/test_serial_graphs.py in a process of its own, where MXNet's
operators get 2 OpenMP threads (MXNET_OMP_MAX_THREADS=2, set by the test before
libmxnet loads), so that a region running on one thread and its end giving the
threads back can be told apart. Prints one JSON object: per scenario, the engine
thread's OpenMP threads seen, and what the corpus's Tree-LSTM ran."""
import json
import os
import sys
import warnings

import mxnet as mx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from gluon_dyn import native, threads  # noqa: E402
from gluon_dyn.hybridize import report  # noqa: E402
import corpus  # noqa: E402
from corpus.compare import run_twins  # noqa: E402


def one_thread_calls(block):
    bodies = report(block)["recursion"]["bodies"]
    return sum(body["calls"]["one_thread"] for body in bodies), \
        sum(body["calls"]["mxnet"] for body in bodies)


def tree_lstm():
    """The corpus's Tree-LSTM, imperative against dynamic (outputs, gradients and
    parameters over its inference calls and training steps: corpus.compare raises
    where they differ); its inference calls' graphs run on one thread, its
    recorded ones on the team."""
    _, dynamic, _ = run_twins(corpus.named("tree_lstm_similarity"))
    serial, calls = one_thread_calls(dynamic)
    return {"one_thread_calls": serial, "mxnet_calls": calls,
            "threads_after": threads.engine_omp_threads()}


def inside_a_span():
    """The engine thread's count inside a span, after its first small graph, and
    after the span."""
    data = mx.nd.ones((2, 3))
    with threads.GraphSpan() as span:
        span.outputs = threads.run_graph(lambda: [data * 2], True, [data])
        inside = threads.engine_omp_threads()
    return {"inside": inside, "after": threads.engine_omp_threads()}


def large_graph_between_small_ones():
    """A graph not to run on one thread ends the span's region before it, for the
    rest of the span."""
    data = mx.nd.ones((2, 3))
    with threads.GraphSpan() as span:
        small = threads.run_graph(lambda: [data + 1], True, [data])
        threads.run_graph(lambda: [small[0] * 3], False, small)
        between = threads.engine_omp_threads()
        span.outputs = threads.run_graph(lambda: [data - 1], True, [data])
        small_again = threads.engine_omp_threads()
    return {"between": between, "small_again": small_again,
            "after": threads.engine_omp_threads()}


def failures():
    """A graph whose operator fails on the engine, and one that raises where it is
    pushed: the region ends all the same (the end is MXNet's kNoSkip)."""
    data = mx.nd.ones((2, 3))
    with threads.GraphSpan() as span:
        failed_on_engine = span.outputs = threads.run_graph(
            lambda: list(native.assert_true(mx.nd, mx.nd.zeros((1,)), data,
                                            message="fails")[1]), True, [data])
    try:
        failed_on_engine[0].wait_to_read()
        raised = None
    except mx.base.MXNetError as error:
        raised = "fails" in str(error)
    try:
        with threads.GraphSpan():
            threads.run_graph(lambda: [mx.nd.dot(data, data)], True, [data])
    except mx.base.MXNetError:
        pass
    return {"failure_raised": raised, "after": threads.engine_omp_threads()}


def main():
    warnings.simplefilter("ignore")
    found = {"available": threads.serial_graphs_available(),
             "before": threads.engine_omp_threads()}
    for scenario in (inside_a_span, large_graph_between_small_ones, failures, tree_lstm):
        found[scenario.__name__] = scenario()
    print(json.dumps(found))


if __name__ == "__main__":
    main()
