"""The training scripts of examples/train, a few steps each on small settings: as
written, with hybridize(dynamic=True) and with --whole-step (those graphs and
gluon_dyn's fused updates) they agree (losses and parameters, 1e-5); a resumed run
continues exactly; under 2 Horovod workers a run equals one process."""
import json
import os
import sys

import mxnet as mx
import numpy as np
import pytest

from train_helpers import TRAIN_DIR, local_workers

import cartpole  # noqa: E402  (examples/train is on the path: train_helpers)
import gan
import lenet
import lstm_lm
import tree_sentiment

SMALL = {
    "lenet": (lenet, ["--steps", "4", "--batch-size", "20"]),
    "lstm_lm": (lstm_lm, ["--steps", "4", "--batch-size", "4", "--chars", "4000", "--bptt", "6",
                          "--embed", "8", "--hidden", "16"]),
    # 8 steps: a step's calls of the tree models run as one batch on the recursion
    # engine (--whole-step) once their first steps were profiled.
    "treernn": (tree_sentiment, ["--cell", "rnn", "--steps", "8", "--batch-size", "4",
                                 "--trees", "4", "--test-trees", "2", "--embed", "8",
                                 "--hidden", "8"]),
    "treelstm": (tree_sentiment, ["--cell", "lstm", "--steps", "8", "--batch-size", "4",
                                  "--trees", "4", "--test-trees", "2", "--embed", "8",
                                  "--hidden", "8"]),
    "cartpole": (cartpole, ["--steps", "3", "--batch-size", "4", "--hidden", "8"]),
    "gan": (gan, ["--steps", "4", "--batch-size", "16", "--hidden", "16"]),
}


def run(name, tmp_path, *extra):
    module, argv = SMALL[name]
    return module.main(argv + ["--quiet", "--plot", str(tmp_path / (name + ".png"))]
                       + list(extra))


def assert_same_training(actual, expected):
    np.testing.assert_allclose(actual["losses"], expected["losses"], rtol=1e-5, atol=1e-5)
    assert sorted(actual["params"]) == sorted(expected["params"])
    for block, params in expected["params"].items():
        for key, value in params.items():
            np.testing.assert_allclose(actual["params"][block][key], value, rtol=1e-5, atol=1e-5,
                                       err_msg="%s %s" % (block, key))


def module_of(name):
    return SMALL[name][0]


def steps_of(name):
    module, argv = SMALL[name]
    return int(argv[argv.index("--steps") + 1])


@pytest.mark.parametrize("name", sorted(SMALL))
def test_dynamic_and_whole_step_runs_match_imperative_run(name, tmp_path):
    imperative = run(name, tmp_path)
    assert all(np.isfinite(imperative["losses"]))
    for mode in ("--dynamic", "--whole-step"):
        dynamic = run(name, tmp_path, mode)
        assert_same_training(dynamic, imperative)
        assert dynamic["metrics"] == pytest.approx(imperative["metrics"], rel=1e-4, abs=1e-4)
        assert os.path.getsize(dynamic["plot"]) > 0
        for block, report in dynamic["reports"].items():
            # 3 calls profiled, graphs served every later one (the recursive models: the
            # recursion engine's compiled bodies, counted among calls on graphs).
            calls = report["calls"]
            assert calls["graph"] == calls["total"] - 3 > 0 and report["fallback"] is None, \
                (block, report)
            if mode == "--whole-step" and module_of(name) is tree_sentiment:
                assert calls["by_kind"]["batched"] >= 3 * 4, (block, report)
    # --whole-step: every step of every trainer (one per block) updated fused, none
    # by MXNet's loop
    assert not imperative["trainer_reports"]
    assert sorted(dynamic["trainer_reports"]) == sorted(imperative["params"])
    for trainer, report in dynamic["trainer_reports"].items():
        assert report["enabled"] and report["fused_steps"] == steps_of(name) \
            and not report["loop_steps"], (trainer, report)


def test_whole_step_runs_on_graphs_without_timing_them_against_python(tmp_path, monkeypatch):
    """gluon_dyn's speed check (on by default; the tests' conftest turns it off) times
    graphs against the forward as written; --dynamic keeps it, --whole-step turns it
    off: the step runs as graphs."""
    from gluon_dyn.hybridize.timing import speed_check
    monkeypatch.setattr(speed_check, "ENABLED_BY_DEFAULT", True)
    checks = {mode: run("gan", tmp_path, mode)["reports"] for mode in ("--dynamic", "--whole-step")}
    for block in ("generator", "discriminator"):
        assert checks["--dynamic"][block]["speed_check"]["state"] != "off"
        assert checks["--whole-step"][block]["speed_check"] == {"state": "off"}


@pytest.mark.parametrize("name, mode", [("lenet", "--dynamic"), ("lstm_lm", "--dynamic"),
                                        ("gan", "--dynamic"), ("gan", "--whole-step")])
def test_resumed_run_continues_exactly(name, mode, tmp_path):
    """Parameters, optimizer state (Adam's moments; with --whole-step, those the fused
    updates kept), carried arrays (the LM's hidden state) and the loss history come
    back from the checkpoint."""
    straight = run(name, tmp_path, mode)
    checkpoints = str(tmp_path / "checkpoint")
    run(name, tmp_path, mode, "--steps", "2", "--checkpoint", checkpoints)
    resumed = run(name, tmp_path, mode, "--checkpoint", checkpoints, "--resume")
    assert_same_training(resumed, straight)


def test_resume_without_a_checkpoint_names_the_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint to resume from in .*missing"):
        run("lenet", tmp_path, "--checkpoint", str(tmp_path / "nothing"), "--resume")


def test_batch_that_does_not_split_over_workers_is_an_error():
    from trainkit import Workers
    workers = Workers()
    workers.size, workers.rank = 2, 0
    with pytest.raises(ValueError, match="batch of 5 cannot be split evenly over 2 workers"):
        workers.share(np.zeros((5, 3)))


@pytest.mark.parametrize("name, mode", [("lstm_lm", "--dynamic"), ("treelstm", "--dynamic"),
                                        ("treelstm", "--whole-step")])
def test_two_horovod_workers_equal_one_process(name, mode, tmp_path):
    """The script as a user runs it under horovodrun (workers on 127.0.0.1): rank 0's
    final checkpoint equals the single-process run's parameters and losses. With
    --whole-step, Horovod's DistributedTrainers update fused (rank 0's last line)."""
    module, argv = SMALL[name]
    checkpoints = tmp_path / "workers"
    outputs = local_workers.run(
        [sys.executable, os.path.join(TRAIN_DIR, module.__name__ + ".py")] + argv
        + [mode, "--quiet", "--checkpoint", str(checkpoints),
           "--plot", str(tmp_path / "workers.png")],
        size=2, env=dict(os.environ, OMP_NUM_THREADS="1"))
    single = run(name, tmp_path, mode)
    if mode == "--whole-step":      # one trainer per block
        assert "; updates fused: %s;" % ", ".join(
            "%s %d" % (block, steps_of(name)) for block in sorted(single["params"])) \
            in outputs[0][0], outputs[0][0]
    with open(checkpoints / "progress.json") as f:
        np.testing.assert_allclose(json.load(f)["losses"], single["losses"], rtol=1e-5)
    for block, params in single["params"].items():
        saved = mx.nd.load(str(checkpoints / (block + ".params")))
        for key, value in params.items():
            np.testing.assert_allclose(saved[key].asnumpy(), value, rtol=1e-5, atol=1e-5,
                                       err_msg=key)


@pytest.mark.parametrize("values", [
    np.random.RandomState(0).randn(20, 4),                       # CartPole's observations
    [[1, 2.5], [3, -4]],                                          # a list
    np.random.RandomState(1).randn(3, 1, 28, 28)[:, :, ::2].T,    # not contiguous
    np.arange(7, dtype=np.int64),
], ids=["float64", "list", "strided", "int64"])
def test_batch_array_holds_the_values_as_float32_and_keeps_no_link_to_them(values):
    import trainkit
    array = trainkit.batch_array(values)
    expected = np.asarray(values, dtype=np.float32)
    assert isinstance(array, mx.nd.NDArray) and array.dtype == np.float32
    assert array.context == mx.cpu() and array.shape == expected.shape
    np.testing.assert_array_equal(array.asnumpy(), expected)
    np.testing.assert_array_equal((array * 2).asnumpy(), expected * 2)   # MXNet reads it
    if isinstance(values, np.ndarray):
        values[...] = 0
    np.testing.assert_array_equal(array.asnumpy(), expected)
