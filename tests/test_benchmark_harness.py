"""benchmarks/harness.py's own logic, with fake variants (no timing is asserted)."""
import os
import subprocess
import sys
import time

import mxnet as mx
import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
import harness  # noqa: E402


class Recorder:
    """Fake variants that log every event (inputs made, calls run) in one list."""

    def __init__(self):
        self.events, self.seen = [], []

    def make_inputs(self, call):
        self.events.append(("make", call))
        return (mx.nd.array([call, 1.0]),)

    def variant(self, name, offset=0.0, **options):
        def run(x):
            self.events.append(("run", name, int(x.asnumpy()[0])))
            self.seen.append(x)
            return x * 2 + offset
        return harness.Variant(name, run, **options)


def test_compare_interleaves_variants_and_checks_before_timing():
    """Checked warm-up rounds start with the reference; each timed round starts one
    variant later (rounds 2, 3, 4 with C, A, B), each variant's timed call (calls 3,
    5, 7) right after an untimed one of its own (calls 2, 4, 6)."""
    recorder = Recorder()
    timings = harness.compare([recorder.variant(n) for n in "ABC"], recorder.make_inputs,
                              repeats=3, warmup=2)
    runs = [event[1:] for event in recorder.events if event[0] == "run"]
    assert harness.SETTLING_CALLS == 1
    assert runs == [(name, call) for call in range(2) for name in "ABC"] + \
        [(name, call) for first, order in ((2, "CAB"), (4, "ABC"), (6, "BCA"))
         for name in order for call in (first, first + 1)]
    assert {name: (len(t.warmup_ms), len(t.timed_ms)) for name, t in timings.items()} == \
        {name: (2, 3) for name in "ABC"}


def test_timed_inputs_are_fresh_and_made_before_the_first_timed_call():
    recorder = Recorder()
    harness.compare([recorder.variant("A"), recorder.variant("B")], recorder.make_inputs,
                    repeats=4, warmup=1)
    # Every call of every variant got an array of its own, never passed twice.
    assert len({id(x) for x in recorder.seen}) == len(recorder.seen) == 2 + 2 * 4 * 2
    first_timed_run = recorder.events.index(("run", "B", 1))   # timed round 1 starts with B
    assert recorder.events[first_timed_run - 16:first_timed_run] == \
        [("make", call) for call in range(1, 9)] * 2


def test_a_wrong_variant_is_rejected_at_its_first_call():
    recorder = Recorder()
    variants = [recorder.variant("reference"), recorder.variant("wrong", offset=1e-3)]
    with pytest.raises(harness.OutputMismatch, match="'wrong', call 0, against 'reference'"):
        harness.compare(variants, recorder.make_inputs, repeats=5, warmup=3)
    assert [e for e in recorder.events if e[0] == "run"] == [("run", "reference", 0),
                                                             ("run", "wrong", 0)]


def test_tolerance_and_structure_are_per_variant():
    recorder = Recorder()
    loose = recorder.variant("loose", offset=1e-3, atol=1e-2)
    harness.run_calls([recorder.variant("reference"), loose], recorder.make_inputs, calls=2)
    pair = harness.Variant("pair", lambda x: [x * 2, x])
    with pytest.raises(harness.OutputMismatch, match="2 outputs, expected 1"):
        harness.run_calls([recorder.variant("reference"), pair], recorder.make_inputs, calls=1)


def test_prepare_gives_each_variant_its_own_arguments():
    recorder = Recorder()
    as_numpy = harness.Variant("numpy", lambda x: x * 2,
                               prepare=lambda args: tuple(a.asnumpy() for a in args))
    times = harness.run_calls([recorder.variant("reference"), as_numpy],
                              recorder.make_inputs, calls=3)
    assert [len(ms) for ms in times.values()] == [3, 3]


def test_normal_array_is_new_with_the_same_values_per_call():
    a, b = harness.normal_array((3, 2), call=7), harness.normal_array((3, 2), call=7)
    assert a is not b and np.array_equal(a.asnumpy(), b.asnumpy())
    assert not np.array_equal(a.asnumpy(), harness.normal_array((3, 2), call=8).asnumpy())


def test_table_under_the_command_line(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", [os.path.join(harness.REPO, "benchmarks", "x.py"),
                                      "--repeats", "5"])
    harness.print_table("title", ["variant", "ms"], [["a", 35.551], ["b", 0.6481], ["c", 320.98]])
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:7] == ["**title** (`.venv/bin/python benchmarks/x.py --repeats 5`)", "",
                          "| variant | ms |", "|---|---|", "| a | 35.6 |", "| b | 0.648 |"]
    assert lines[7] == "| c | 321.0 |"


def test_warm_up_goes_on_while_a_speed_check_measures():
    recorder = Recorder()
    measuring = recorder.variant("dynamic")
    rounds = []
    measuring.run.measuring = lambda: len(rounds) < 5   # settles after 5 warm-up rounds
    reference = recorder.variant("reference")
    original = reference.run
    reference.run = lambda x: rounds.append(1) or original(x)
    timings = harness.compare([reference, measuring], recorder.make_inputs, repeats=3, warmup=3)
    assert {name: (len(t.warmup_ms), len(t.timed_ms)) for name, t in timings.items()} == \
        {"reference": (5, 3), "dynamic": (5, 3)}
    # never more than twice the warm-up: a check that never settles is said, not waited for
    recorder = Recorder()
    never = recorder.variant("dynamic")
    never.run.measuring = lambda: True
    timings = harness.compare([never], recorder.make_inputs, repeats=1, warmup=3)
    assert len(timings["dynamic"].warmup_ms) == 6


def test_a_self_timed_variant_is_recorded_with_its_own_time():
    recorder = Recorder()
    self_timed = harness.Variant("worker", lambda x: (x * 2, 123.0), self_timed=True)
    timings = harness.compare([recorder.variant("reference"), self_timed], recorder.make_inputs,
                              repeats=2, warmup=2)
    assert timings["worker"].warmup_ms == timings["worker"].timed_ms == [123.0, 123.0]


def test_a_budget_adds_the_timed_calls_that_fit_up_to_ten_times_the_repeats():
    def fixed(name, ms):
        return harness.Variant(name, lambda x: (x * 2, ms), self_timed=True)
    make_inputs = Recorder().make_inputs
    # Rounds of two calls of each, 2 * (2 + 3) ms: 100 ms fit 10; 1000 ms fit 100,
    # capped at 10 x 4.
    for budget_ms, timed in ((0, 4), (10, 4), (100, 10), (1000, 40)):
        timings = harness.compare([fixed("a", 2.0), fixed("b", 3.0)], make_inputs, repeats=4,
                                  warmup=2, budget_ms=budget_ms)
        assert [len(t.timed_ms) for t in timings.values()] == [timed, timed]
    # The round time is judged on the later warm-up calls, past the first calls' traces.
    assert harness.timed_repeats(4, 100, {"a": [500.0, 500.0, 1.0, 1.0]}) == 40


def rnn_cell_values(rng, hidden=3, inputs=4):
    """cell_values of an RNNCell (tanh), made up: what torch_twins.build_cell_loop takes."""
    shapes = [(hidden, inputs), (hidden, hidden), (hidden,), (hidden,)]
    return ("RNNCell",) + tuple(rng.standard_normal(shape).astype("float32")
                                for shape in shapes)


def rnn_loop(seq, i2h_weight, h2h_weight, i2h_bias, h2h_bias):
    h, outputs = np.zeros((seq.shape[1], h2h_weight.shape[0]), "float32"), []
    for x in seq:
        h = np.tanh(x @ i2h_weight.T + i2h_bias + h @ h2h_weight.T + h2h_bias)
        outputs.append(h)
    return np.stack(outputs)


# The PyTorch worker's tests need torch (pyproject's bench extra, which `make setup`
# installs): without it they fail, they are not skipped.

@pytest.mark.parametrize("train", [False, True])
def test_a_pytorch_worker_runs_a_twin(train):
    rng = np.random.RandomState(0)
    cell = rnn_cell_values(rng)
    seq = rng.standard_normal((5, 2, 4)).astype("float32")
    with harness.TorchProcess("build_cell_loop", cell, train=train, threads=1) as worker:
        variant, = worker.variants(("pytorch eager",))
        assert variant.self_timed
        tokens = [variant.prepare((mx.nd.array(seq),)) for _ in range(2)]
        for token in tokens:
            start = time.perf_counter()
            (output,), ms = variant.run(*token)
            round_trip_ms = (time.perf_counter() - start) * 1000
            np.testing.assert_allclose(output, rnn_loop(seq, *cell[1:]), rtol=1e-5, atol=1e-5)
            # the worker times its call alone: within the round trip (same clock, in ms)
            assert 0 < ms < round_trip_ms
    assert not worker.process.is_alive()


def test_an_error_in_the_worker_comes_back_and_ends_it():
    rng = np.random.RandomState(0)
    worker = harness.TorchProcess("build_cell_loop", rnn_cell_values(rng), threads=1)
    variant, = worker.variants(("pytorch eager",))
    wrong_width = variant.prepare((mx.nd.ones((5, 2, 7)),))
    with pytest.raises(harness.WorkerError, match="(?s)Traceback.*RuntimeError"):
        variant.run(*wrong_width)
    assert not worker.process.is_alive()
    worker.close()   # closing again does nothing


def test_a_builder_the_worker_lacks_is_an_error():
    with pytest.raises(harness.WorkerError, match="has no attribute 'build_nothing'"):
        harness.TorchProcess("build_nothing", threads=1)


def test_pytorch_is_found_where_the_worker_looks_without_importing_it(monkeypatch, tmp_path):
    """`make setup` installs torch off this process's path (torch_worker.TORCH_PACKAGES):
    the benchmarks' PyTorch rows run; with no torch there, they are left out."""
    harness.torch_installed.cache_clear()
    try:
        assert harness.torch_installed()
        assert "torch" not in sys.modules
        monkeypatch.setattr(harness.torch_worker, "TORCH_PACKAGES", str(tmp_path))
        harness.torch_installed.cache_clear()
        assert not harness.torch_installed()
    finally:
        harness.torch_installed.cache_clear()


SPINNER = """
import sys, time
print("spinning", flush=True)
total = 0
for k in range(%d):
    total += k
open(sys.argv[1], "w").write(str(total))
time.sleep(60)
"""


@pytest.mark.parametrize("through_settle", [False, True])
def test_the_next_variant_waits_for_a_workers_spinning_threads(tmp_path, monkeypatch,
                                                               through_settle):
    """A process whose thread still runs (a PyTorch worker's OpenMP team spinning after
    a step) is waited for: the wait returns only after the thread went to sleep, which
    it does after writing the marker (the order is asserted, no time)."""
    marker = tmp_path / "spun"
    child = subprocess.Popen([sys.executable, "-c", SPINNER % 3_000_000, str(marker)],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "spinning"
        if through_settle:
            monkeypatch.setattr(harness.TorchProcess, "live_workers", {child.pid})
            harness.settle(timeout=30.0)
        else:
            harness.wait_for_idle(child.pid, timeout=30.0)
        assert marker.exists()
        assert harness._running_threads(child.pid, ()) == []
    finally:
        child.kill()
        child.wait()
