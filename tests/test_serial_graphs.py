"""Small graphs on one OpenMP thread (gluon_dyn/threads.py): which graphs qualify,
and, in a process whose operators get 2 threads (serial_graphs_worker.py), that a
region runs its graphs on one thread, gives the threads back after them (also
when a graph fails), and that the corpus's Tree-LSTM runs its groups that way
with the same outputs, gradients and parameters as imperative."""
import json
import os
import subprocess
import sys

import mxnet as mx
import pytest
from mxnet import autograd

from gluon_dyn import threads
from gluon_dyn.hybridize.recursion.execution import OneThreadChoice, largest_array

HERE = os.path.dirname(os.path.abspath(__file__))


def _dense_chain(hidden):
    data, weight = mx.sym.var("data"), mx.sym.var("weight")
    return mx.sym.tanh(mx.sym.FullyConnected(data, weight, num_hidden=hidden, no_bias=True))


def test_the_largest_array_counts_what_the_graph_makes_not_only_its_inputs():
    # (4, 8) inputs and a (16, 8) weight make a (4, 16) array; a (4, 512) one is
    # made from a (512, 8) weight.
    assert largest_array(_dense_chain(16), [(4, 8), (16, 8)]) == 128
    assert largest_array(_dense_chain(512), [(4, 8), (512, 8)]) == 4096


def test_shapes_mxnet_cannot_infer_make_no_choice_of_one_thread():
    assert largest_array(_dense_chain(16), [(4, 8), (3, 3)]) is None


@pytest.mark.skipif(not threads.serial_graphs_available(), reason="MXNet's engine here "
                    "runs a context's operators on several threads")
def test_inference_graphs_of_small_arrays_run_on_one_thread_and_others_do_not():
    small = OneThreadChoice(_dense_chain(16), [None, None])
    large = OneThreadChoice(_dense_chain(512), [None, None])
    assert small([mx.nd.ones((4, 8)), mx.nd.ones((16, 8))])
    assert not large([mx.nd.ones((4, 8)), mx.nd.ones((512, 8))])
    with autograd.record():
        assert not OneThreadChoice(_dense_chain(16), [None, None])(
            [mx.nd.ones((4, 8)), mx.nd.ones((16, 8))])


@pytest.mark.parametrize("environ, one_thread", [
    ({}, True),
    ({"MXNET_ENGINE_TYPE": "NaiveEngine"}, True),
    ({"MXNET_CPU_WORKER_NTHREADS": "2"}, False),
    ({"MXNET_ENGINE_TYPE": "ThreadedEngine"}, False),
])
def test_regions_are_used_only_where_one_engine_thread_runs_a_context(environ, one_thread):
    # pylint: disable=protected-access
    assert threads._engine_runs_a_context_on_one_thread(environ) is one_thread


@pytest.fixture(scope="module")
def worker_found():
    environ = dict(os.environ, MXNET_OMP_MAX_THREADS="2")
    environ.pop("OMP_NUM_THREADS", None)
    environ.pop("MXNET_ENGINE_TYPE", None)
    done = subprocess.run([sys.executable, os.path.join(HERE, "serial_graphs_worker.py")],
                          env=environ, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["available"] and found["before"] == 2, found
    return found


def test_a_span_runs_its_graphs_on_one_thread_then_gives_the_threads_back(worker_found):
    assert worker_found["inside_a_span"] == {"inside": 1, "after": 2}


def test_a_graph_of_large_arrays_ends_the_region_for_the_rest_of_the_span(worker_found):
    assert worker_found["large_graph_between_small_ones"] == {
        "between": 2, "small_again": 2, "after": 2}


def test_a_failing_graph_gives_the_threads_back_too(worker_found):
    assert worker_found["failures"] == {"failure_raised": True, "after": 2}


def test_the_tree_lstm_runs_its_groups_on_one_thread_with_imperatives_results(worker_found):
    # The worker's run_twins compared outputs, gradients and parameters (1e-5).
    tree = worker_found["tree_lstm"]
    # Inference calls' graphs on one thread; recorded ones (training) on the team.
    assert 0 < tree["one_thread_calls"] < tree["mxnet_calls"]
    assert tree["threads_after"] == 2
