"""benchmarks/step_threads.py: the calling thread's share of a training step, and the
CPU time inside backward() and Trainer.step, measured for every variant (the wrapped
methods are reached, and restored after). No timing is asserted beyond the figures'
consistency."""
import os
import sys

import mxnet as mx
from mxnet.gluon import trainer as gluon_trainer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
import step_threads  # noqa: E402  (puts examples/train on the path)

import lenet  # noqa: E402


def test_every_variant_is_measured_inside_backward_and_trainer_step():
    results = step_threads.measure("LeNet (small)", lenet, ["--batch-size", "20"], warmup=2,
                                   rounds=2, steps_per_run=3)
    assert list(results) == [step_threads.REFERENCE, step_threads.WHOLE_STEP] + \
        step_threads.FUSED_BY_HAND
    for variant, figures in results.items():
        assert 0 < figures["in backward()"] < figures["thread CPU"], (variant, figures)
        assert 0 < figures["in trainer.step"] < figures["thread CPU"], (variant, figures)
        assert abs(figures["wall"] - figures["thread CPU"] - figures["not computing"]) < \
            0.5 * figures["wall"], (variant, figures)
    for method in (mx.nd.NDArray.backward, gluon_trainer.Trainer.step):   # not left wrapped
        assert "CallTimes" not in method.__qualname__, method
    assert "| LeNet (small) | gluon_dyn whole step |" in step_threads.table({"LeNet (small)": results})
