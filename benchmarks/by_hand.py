"""The training scripts' models as a Gluon user hybridizes them by hand, without
gluon_dyn: what MXNet offers instead of hybridize(dynamic=True) where the model can be
rewritten as a HybridBlock.

Each class below is its script's Block made a HybridBlock: the script's own layers
(its __init__, so the same parameters under the same names), its forward rewritten as
`hybrid_forward` on `F` (dropout as an operator, which MXNet leaves out outside
training). `build` makes the script's own Training with these models in place of
its Blocks, then hybridizes them and every loss block the Training keeps with
planned memory and shapes (static_alloc, static_shape), as a user tuning for speed
does. (static_shape marks
the parameters, whose gradients MXNet 1.9.1 can stop writing when the calls of a
block per recording change: docs/mxnet_behaviours.md. The report's check of every
warm-up step's loss, and tests/test_by_hand_models.py, show that these train as their
scripts do, the GAN's discriminator called twice a step, then once.) With `fused_update`,
each trainer's update runs as gluon_dyn.fused_updates makes it: the model as MXNet's
best hand-written graph, and the update as the whole step runs it.

The tree models (a structure per input) and the LM (state kept on the block between
calls, a loop over its window) have no such rewrite without changing what the script
computes or how it carries its state; the CartPole policy decides one step at a time,
so its step is the environment's Python either way.
"""
import contextlib

from mxnet import gluon

import gluon_dyn
from training_twins import build as build_as_written

import gan  # noqa: E402  (examples/train is on the path: training_twins)
import lenet  # noqa: E402


class LeNet(lenet.LeNet, gluon.HybridBlock):
    forward = gluon.HybridBlock.forward         # the script's layers, this forward

    def hybrid_forward(self, F, x):
        x = self.pool(self.conv1(x))
        x = self.pool(self.conv2(x))
        return self.output(F.Dropout(self.hidden(x), p=self.dropout))


class Generator(gan.Generator, gluon.HybridBlock):
    forward = gluon.HybridBlock.forward

    def hybrid_forward(self, F, z):
        h = z
        for layer in self.layers:
            h = F.LeakyReLU(layer(h), slope=0.2)
        return F.tanh(self.pixels(h))


class Discriminator(gan.Discriminator, gluon.HybridBlock):
    forward = gluon.HybridBlock.forward

    def hybrid_forward(self, F, images):
        h = F.Dropout(F.LeakyReLU(self.hidden(images), slope=0.2), p=self.dropout)
        h = F.LeakyReLU(self.hidden2(h), slope=0.2)
        return F.reshape(self.score(h), (-1,))


# script name -> {the script's model class name: its HybridBlock}
MODELS = {"lenet": {"LeNet": LeNet},
          "gan": {"Generator": Generator, "Discriminator": Discriminator}}


def available(script):
    """Whether `script` (a module of examples/train) has models hybridized by hand."""
    return script.NAME in MODELS


@contextlib.contextmanager
def _models_replaced(script):
    replaced = MODELS[script.NAME]
    written = {name: getattr(script, name) for name in replaced}
    for name, model in replaced.items():
        setattr(script, name, model)
    try:
        yield
    finally:
        for name, model in written.items():
            setattr(script, name, model)


def build(script, flags, fused_update=False):
    """The script's Training with `flags` (run as written: no --dynamic), its models
    the HybridBlocks above, hybridized with its losses (static_alloc, static_shape);
    each trainer updating as gluon_dyn.fused_updates makes it with `fused_update`."""
    if "--dynamic" in flags or "--whole-step" in flags:
        raise ValueError("models hybridized by hand run without gluon_dyn's flags, got %s"
                         % flags)
    with _models_replaced(script):
        training = build_as_written(script, flags)
    blocks = [value for value in vars(training).values() if isinstance(value, gluon.HybridBlock)]
    for block in blocks:
        block.hybridize(static_alloc=True, static_shape=True)
    if fused_update:
        for trainer in training.trainers.values():
            gluon_dyn.fused_updates(trainer)
    return training
