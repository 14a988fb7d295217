"""benchmarks/by_hand.py: the training scripts' models hybridized by hand (what MXNet
offers instead of gluon_dyn, a column of `make report`) train as the scripts as
written do, dropout included, and run as Gluon's own CachedOps with planned memory and
shapes, without gluon_dyn. No timing."""
import os
import sys

import numpy as np
import pytest
from mxnet import gluon

import gluon_dyn
from gluon_dyn.hybridize.call.dynamic import runner_of

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
import by_hand  # noqa: E402
import training_report  # noqa: E402
import training_twins  # noqa: E402  (puts examples/train on the path)

import gan  # noqa: E402
import lenet  # noqa: E402
import lstm_lm  # noqa: E402

SMALL = {"lenet": (lenet, ["--batch-size", "20"]),
         "gan": (gan, ["--batch-size", "16", "--hidden", "16"])}
STEPS = 5


def hybridized_blocks(training):
    return [block for block in vars(training).values() if isinstance(block, gluon.HybridBlock)]


@pytest.mark.parametrize("fused_update", [False, True])
@pytest.mark.parametrize("name", sorted(SMALL))
def test_models_hybridized_by_hand_train_as_the_script_as_written(name, fused_update):
    script, flags = SMALL[name]
    reference = training_twins.initialized(training_twins.build(script, flags))
    training = by_hand.build(script, flags, fused_update)
    training_twins.share_values(reference, training)
    written = training_twins.mxnet_steps(reference)(range(STEPS))[0]
    # every model is the HybridBlock, and so is every loss the Training keeps
    models = set(by_hand.MODELS[name].values())
    assert {type(block) for block in training.blocks.values()} == models
    assert len(hybridized_blocks(training)) == len(training.blocks) + 1
    got = training_twins.mxnet_steps(training)(range(STEPS))[0]
    np.testing.assert_allclose(got, written, rtol=1e-5)
    for block in hybridized_blocks(training):
        # served by Gluon's CachedOp with planned memory and shapes, not gluon_dyn
        assert block._cached_op is not None, block            # pylint: disable=protected-access
        flags = dict(block._flags)                              # pylint: disable=protected-access
        assert flags["static_alloc"] and flags["static_shape"], flags
        with pytest.raises(ValueError, match="not hybridized with dynamic=True"):
            runner_of(block)
    for trainer in training.trainers.values():
        done = gluon_dyn.training.report(trainer)
        assert done["enabled"] == fused_update
        assert done["fused_steps"] == (STEPS if fused_update else 0)


def test_only_scripts_whose_models_have_a_rewrite_get_one():
    assert by_hand.available(lenet) and by_hand.available(gan)
    assert not by_hand.available(lstm_lm)
    with pytest.raises(ValueError, match="without gluon_dyn's flags"):
        by_hand.build(lenet, ["--dynamic"])
    # the script's own classes are back once the Training is built
    by_hand.build(*SMALL["lenet"])
    assert lenet.LeNet is not by_hand.LeNet and issubclass(lenet.LeNet, gluon.Block)


def test_the_report_checks_the_models_hybridized_by_hand(monkeypatch):
    """measure_training's warm-up steps check the variants hybridized by hand against
    the script as written: one computing otherwise (a dropout rate off) stops it."""
    script, flags = SMALL["lenet"]
    monkeypatch.setattr(training_report.harness, "torch_installed", lambda: False)
    rates, _, _, _ = training_report.measure_training("lenet", script, flags, 3, 1)
    assert {title for title, _ in training_report.BY_HAND_VARIANTS} <= set(rates)

    class Otherwise(by_hand.LeNet):
        def __init__(self, dropout=0.3, **kwargs):
            super().__init__(dropout=0.6, **kwargs)
    monkeypatch.setitem(by_hand.MODELS, "lenet", {"LeNet": Otherwise})
    with pytest.raises(AssertionError, match="MXNet hybridized by hand disagrees"):
        training_report.measure_training("lenet", script, flags, 3, 1)
