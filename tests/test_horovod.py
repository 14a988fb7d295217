"""Horovod data parallelism: 2 workers on 127.0.0.1, each training on half of every
batch, against one process trained on the whole batches (tests/horovod_worker.py)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import horovod_worker
from train_helpers import local_workers

HERE = os.path.dirname(os.path.abspath(__file__))
STALE = "stale gradients of untaken branches: issue 16, runner"


def run_workers(tmp_path, scenarios):
    local_workers.run([sys.executable, os.path.join(HERE, "horovod_worker.py"), str(tmp_path)]
                      + scenarios, size=2, env=dict(os.environ, OMP_NUM_THREADS="1"))
    return {name: [dict(np.load(tmp_path / ("%s-rank%d.npz" % (name, rank))))
                   for rank in range(2)] for name in scenarios}


@pytest.fixture(scope="module")
def worker_results(tmp_path_factory):
    """One 2-worker run for every scenario (each worker process starts once)."""
    return run_workers(tmp_path_factory.mktemp("horovod"), list(horovod_worker.SCENARIOS))


def params_of(result):
    return {key[len("param:"):]: value for key, value in result.items()
            if key.startswith("param:")}


def assert_params_close(actual, expected, what):
    assert sorted(actual) == sorted(expected), what
    for name in expected:
        np.testing.assert_allclose(actual[name], expected[name], rtol=1e-5, atol=1e-5,
                                   err_msg="%s: %s" % (what, name))


def assert_workers_agree(results):
    a, b = (params_of(r) for r in results)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg="ranks differ in " + name)


def assert_matches_halves_in_one_process(results, schedule):
    """Both ranks agree, and equal one process that ran the two halves of every batch
    as separate forwards and backwards, gradients added (the documented rule)."""
    assert_workers_agree(results)
    net, losses, _ = horovod_worker.run_branches_in_one_process(schedule, True)
    assert_params_close(params_of(results[0]), horovod_worker.parameters(net),
                        "2 workers vs their halves run in one process")
    np.testing.assert_allclose(results[0]["losses"] + results[1]["losses"], losses, rtol=1e-5)


def report_of(result):
    return json.loads(str(result["report"]))


def assert_graphs_served(results, calls):
    """On each worker, `calls` calls: 3 profiled, graphs served every other one."""
    for result in results:
        report = report_of(result)
        assert report["fallback"] is None, report
        assert (report["calls"]["total"], report["calls"]["graph"]) == (calls, calls - 3), \
            report["calls"]


@pytest.mark.parametrize("model", ["sequence", "tree"])
def test_two_workers_equal_one_process_on_whole_batches(worker_results, model):
    results = worker_results[model + "_dynamic"]
    assert_workers_agree(results)
    for dynamic in (True, False):
        net, losses, error = horovod_worker.run_model(model, dynamic)
        assert error is None
        assert_params_close(params_of(results[0]), horovod_worker.parameters(net),
                            "%s, 2 workers vs one process (%s)"
                            % (model, "dynamic" if dynamic else "imperative"))
        # Each worker's loss is that of its half; together they are the batch's.
        np.testing.assert_allclose(results[0]["losses"] + results[1]["losses"], losses,
                                   rtol=1e-5, atol=1e-5)
    assert_graphs_served(results, 8)


def test_parameters_were_broadcast_after_deferred_initialisation(worker_results):
    """The ranks initialise from different seeds (100 + rank): equal parameters after
    training mean the broadcast Horovod injects into deferred initialisation ran."""
    rank0, rank1 = (horovod_worker.initial_parameters("sequence", seed) for seed in (100, 101))
    assert any(not np.allclose(rank0[name], rank1[name]) for name in rank0)
    assert_workers_agree(worker_results["sequence_dynamic"])


def test_halves_on_different_branches_imperative(worker_results):
    """Documented semantics: a worker whose path did not use a parameter adds zero;
    a parameter no worker used stays stale (skipped with ignore_stale_grad)."""
    assert_matches_halves_in_one_process(worker_results["branches_imperative"], "with_stale")


def test_halves_on_different_branches_dynamic_when_each_branch_has_a_user(worker_results):
    results = worker_results["branches_dynamic_mixed"]
    assert_matches_halves_in_one_process(results, "mixed")
    assert_graphs_served(results, 8)
    statements = report_of(results[0])["statements"]
    assert any(fate.startswith("if: cond") for fate in statements.values()), statements


def test_halves_on_different_branches_dynamic_with_stale_parameters(worker_results):
    assert_matches_halves_in_one_process(worker_results["branches_dynamic"], "with_stale")
    assert_graphs_served(worker_results["branches_dynamic"], 8)


def test_stale_parameter_raises_on_every_worker_imperative(worker_results):
    _, _, expected = horovod_worker.run_branches_in_one_process("with_stale", False)
    assert "has not been updated by backward since last `step`" in expected
    for result in worker_results["branches_imperative_strict"]:
        assert str(result["error"]) == expected


def test_stale_parameter_raises_on_every_worker_dynamic(worker_results):
    _, _, expected = horovod_worker.run_branches_in_one_process("with_stale", False)
    for result in worker_results["branches_dynamic_strict"]:
        assert str(result["error"]) == expected
    # The 4th step raised: its call, the first after 3 profiled, ran on a graph.
    assert_graphs_served(worker_results["branches_dynamic_strict"], 4)


def test_horovod_library_calls_no_mxnet_function_taking_std_string():
    """Horovod builds with the new C++ ABI, the mxnet wheel with the old one: they
    link only where no std::string (whose layout differs) crosses. Every mxnet
    symbol Horovod's library imports is one libmxnet.so exports, none mentions
    the new ABI's types; the 2-worker tests above show it runs."""
    import importlib.util
    import glob
    import mxnet
    # Located, not imported: importing it would put libmxnet.so in the global
    # symbol scope of the test process.
    horovod_dir = os.path.dirname(importlib.util.find_spec("horovod").origin)
    library, = glob.glob(os.path.join(horovod_dir, "mxnet", "mpi_lib*.so"))
    libmxnet = os.path.join(os.path.dirname(mxnet.__file__), "libmxnet.so")

    def symbols(path, *flags):
        listing = subprocess.run(["nm", "-D", *flags, path], check=True, capture_output=True,
                                 text=True).stdout
        return {line.split()[-1] for line in listing.splitlines() if line.strip()}

    imported = {s for s in symbols(library, "--undefined-only")
                if s.startswith("_ZN5mxnet") or s.startswith("_ZNK5mxnet") or s.startswith("MX")}
    assert imported, "expected Horovod to call into libmxnet"
    assert not [s for s in imported if "cxx11" in s], imported
    assert imported <= symbols(libmxnet, "--defined-only"), imported - symbols(libmxnet,
                                                                                "--defined-only")


def test_a_worker_that_crashes_is_reported_with_its_python_stack():
    """A worker killed by a segmentation fault in MXNet's process names the signal and
    shows where its Python was (MXNet's own handler would print no stack)."""
    crash = ("import ctypes, mxnet\n"
             "def read_address_zero():\n"
             "    ctypes.string_at(0)\n"
             "read_address_zero()\n")
    with pytest.raises(local_workers.WorkersFailed) as failed:
        local_workers.run([sys.executable, "-c", crash], size=2)
    message = str(failed.value)
    assert "was killed by SIGSEGV" in message, message
    assert 'line 3 in read_address_zero' in message, message
    assert "Extension modules:" not in message
