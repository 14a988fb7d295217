"""The PyTorch versions of the training scripts (benchmarks/torch_training.py, served by
the PyTorch worker process) train as the scripts do: step by step the same losses from
the same values on the same batches, eager and under torch.compile
(benchmarks/training_twins.check_twins, which `make report` runs before timing), and
the check catches a twin that trains otherwise. No timing. Needs PyTorch (`make
setup`): without it these tests fail, they are not skipped."""
import os
import re
import sys

import numpy as np
import pytest

from gluon_dyn import threads
from gluon_dyn.training import wide_steps

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
import training_report  # noqa: E402
import training_twins  # noqa: E402  (puts examples/train on the path)

import cartpole  # noqa: E402
import gan  # noqa: E402
import lenet  # noqa: E402
import lstm_lm  # noqa: E402
import tree_sentiment  # noqa: E402
from trainkit.workers import Workers  # noqa: E402

# Small settings of every script (and both tree cells), quick to compile.
SMALL = {
    "lenet": (lenet, ["--batch-size", "20"]),
    "lstm_lm": (lstm_lm, ["--batch-size", "4", "--chars", "4000", "--bptt", "6", "--embed", "8",
                          "--hidden", "16"]),
    "treernn": (tree_sentiment, ["--cell", "rnn", "--batch-size", "2", "--trees", "2",
                                 "--test-trees", "2", "--embed", "8", "--hidden", "8"]),
    "treelstm": (tree_sentiment, ["--cell", "lstm", "--batch-size", "2", "--trees", "2",
                                  "--test-trees", "2", "--embed", "8", "--hidden", "8"]),
    "cartpole": (cartpole, ["--batch-size", "4", "--hidden", "8"]),
    "gan": (gan, ["--batch-size", "16", "--hidden", "16"]),
}


@pytest.mark.long
@pytest.mark.parametrize("name", sorted(SMALL))
def test_a_pytorch_twin_trains_as_its_script(name):
    script, flags = SMALL[name]
    checks = training_twins.check_twins(script, flags)
    assert sorted(checks) == ["pytorch eager", "torch.compile"]
    for variant, check in checks.items():
        assert check.failure is None and check.difference <= training_twins.RTOL, (variant, check)
    # torch.compile compiled the models (eager compiled nothing)
    assert checks["pytorch eager"].compiled["graphs"] == 0
    assert checks["torch.compile"].compiled["graphs"] >= 1
    assert not checks["torch.compile"].compiled["graph_breaks"]


@pytest.mark.parametrize("name", ["lenet", "treernn"])      # Adam, AdaGrad
def test_a_twin_training_otherwise_is_caught(name, monkeypatch):
    """A learning rate 5% off: the losses of the first steps tell."""
    script, flags = SMALL[name]
    settings = training_twins.optimizer_settings
    monkeypatch.setattr(training_twins, "optimizer_settings",
                        lambda trainer: dict(settings(trainer), lr=settings(trainer)["lr"] * 1.05))
    with pytest.raises(training_twins.TwinMismatch, match="'pytorch eager' trains to other losses"):
        training_twins.check_twins(script, flags, variants=("pytorch eager",))


def test_a_variant_that_cannot_run_is_reported_not_raised():
    script, flags = SMALL["lenet"]
    checks = training_twins.check_twins(script, flags, variants=("pytorch eager", "pytorch jit"))
    assert checks["pytorch eager"].failure is None
    assert "no PyTorch training variant pytorch jit" in checks["pytorch jit"].failure


class FakeSteps:
    """A training variant of training_report.interleaved that logs its steps."""

    def __init__(self, name, log, loss=1.0):
        self.name, self.log, self.loss = name, log, loss

    def __call__(self, indices):
        self.log.extend((self.name, index) for index in indices)
        return [self.loss + index for index in indices], 10 * len(indices), 0.5 * len(indices)


def test_report_steps_are_interleaved_and_mxnet_variants_checked():
    log = []
    variants = {name: FakeSteps(name, log) for name in "ABC"}
    rates = training_report.interleaved(variants, warmup=2, rounds=3, checked=["A", "B"])
    assert rates == {name: 20.0 for name in "ABC"}
    # each timed run (steps 3-6, 8-11, 13-16) right after an untimed step of its
    # variant (2, 7, 12)
    per_round = 1 + training_report.RUN_STEPS
    assert per_round == 5
    assert log == [(name, index) for index in range(2) for name in "ABC"] + \
        [(name, index) for first, order in ((2, "ABC"), (7, "BCA"), (12, "CAB"))
         for name in order for index in range(first, first + per_round)]
    # a checked variant computing other losses stops the report; an unchecked one does not
    variants["B"].loss = variants["C"].loss = 2.0
    with pytest.raises(AssertionError, match="B disagrees with A"):
        training_report.interleaved(variants, warmup=1, rounds=1, checked=["A", "B"])
    assert training_report.interleaved(variants, warmup=1, rounds=1, checked=["A"])


@pytest.mark.parametrize("name", ["lenet", "treernn"])      # Adam, AdaGrad
def test_report_checks_the_whole_step_against_imperative(name, monkeypatch):
    """measure_training's warm-up steps check every MXNet variant, the whole step's
    fused updates too, against the script as written (MXNet's side only here); a
    whole step that trained otherwise (a learning rate 50% off) stops the report."""
    script, flags = SMALL[name]
    monkeypatch.setattr(training_report.harness, "torch_installed", lambda: False)
    rates, note, checks, _ = training_report.measure_training(name, script, flags, 3, 2)
    by_hand = training_report.BY_HAND_VARIANTS if name == "lenet" else []
    assert sorted(rates) == sorted(title for title, _ in training_report.MXNET_VARIANTS + by_hand)
    assert training_report.WHOLE_STEP in rates and not checks
    trainer_name = {"lenet": "lenet", "treernn": "model"}[name]
    # 3 warm-up steps, the whole step's own until its trainer chose its cores
    # (measured afresh), 2 timed runs each after an untimed step
    choice = wide_steps.WARM_STEPS + 2 * wide_steps.BLOCK * wide_steps.ROUNDS \
        if threads.all_cores_available() else 0
    steps = 3 + choice + 2 * (1 + training_report.RUN_STEPS)
    assert "Whole step: updates fused: %s %d" % (trainer_name, steps) in note, note
    trainer = Workers.trainer

    def fused_trainer_off(self, params, optimizer, options, prefix=""):
        if self.fused_updates:
            options = dict(options, learning_rate=options["learning_rate"] * 1.5)
        return trainer(self, params, optimizer, options, prefix)
    monkeypatch.setattr(Workers, "trainer", fused_trainer_off)
    with pytest.raises(AssertionError,
                       match="gluon_dyn whole step disagrees with MXNet imperative"):
        training_report.measure_training(name, script, flags, 3, 2)


def test_reinforces_gluon_dyn_variants_decide_on_tvm(monkeypatch):
    """The report trains REINFORCE's gluon_dyn variants with backend="tvm": their
    decisions (inference calls) run on TVM plans, checked against the script as written."""
    script, flags = SMALL["cartpole"]
    monkeypatch.setattr(training_report.harness, "torch_installed", lambda: False)
    _, note, _, _ = training_report.measure_training(
        "REINFORCE (CartPole)", script, flags, 2, 1)
    per_call, whole_step = note.split("Whole step:")
    for variant in (per_call, whole_step):
        runs = re.search(r"(\d+) runs of TVM plans", variant)
        assert runs and int(runs.group(1)) > 0, note


def test_initial_values_are_shared_before_deferred_initialisation():
    """The dynamic variant and the PyTorch twin start from the reference's values, also
    where Gluon learns the input sizes at the first call (LeNet's layers)."""
    script, flags = SMALL["lenet"]
    reference = training_twins.initialized(training_twins.build(script, flags))
    other = training_twins.build(script, flags + ["--dynamic"])
    training_twins.share_values(reference, other)
    training_twins.initialized(other)
    expected = training_twins.parameter_values(reference)["lenet"]
    got = training_twins.parameter_values(other)["lenet"]
    assert sorted(got) == sorted(expected) and "conv1.weight" in got
    for key, value in expected.items():
        np.testing.assert_array_equal(got[key], value, err_msg=key)


def test_initialising_keeps_what_a_training_carries():
    """The inference call that finishes initialisation leaves no LM state behind: every
    variant's first call starts from none."""
    script, flags = SMALL["lstm_lm"]
    training = training_twins.initialized(training_twins.build(script, flags))
    assert training.carried() == {}
