"""The training scripts' models as a Gluon user hybridizes them by hand, without
gluon_dyn: what MXNet offers instead of hybridize(dynamic=True) where the model can be
rewritten as a HybridBlock.

Each class below is its script's Block rewritten as a HybridBlock (`hybrid_forward`
on `F`, dropout as an operator, which MXNet leaves out outside training), with the
script's layers under the same names, so the same parameters. `build` makes the
script's own Training with these models in place of its Blocks, then hybridizes
them and every loss block the Training keeps with planned memory and shapes
(static_alloc, static_shape), as a user tuning for speed does. (static_shape marks
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


class LeNet(gluon.HybridBlock):
    def __init__(self, dropout=0.3, **kwargs):
        super().__init__(**kwargs)
        self.dropout = dropout
        with self.name_scope():
            self.conv1 = gluon.nn.Conv2D(16, 3, padding=1, activation="relu")
            self.conv2 = gluon.nn.Conv2D(32, 3, padding=1, activation="relu")
            self.pool = gluon.nn.MaxPool2D(2)
            self.hidden = gluon.nn.Dense(64, activation="relu")
            self.output = gluon.nn.Dense(10)

    def hybrid_forward(self, F, x):
        x = self.pool(self.conv1(x))
        x = self.pool(self.conv2(x))
        return self.output(F.Dropout(self.hidden(x), p=self.dropout))


class Generator(gluon.HybridBlock):
    def __init__(self, hidden, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.layers = [gluon.nn.Dense(hidden, in_units=gan.NOISE),
                           gluon.nn.Dense(2 * hidden, in_units=hidden)]
            for k, layer in enumerate(self.layers):
                self.register_child(layer, "layer%d" % k)
            self.pixels = gluon.nn.Dense(64, in_units=2 * hidden)

    def hybrid_forward(self, F, z):
        h = z
        for layer in self.layers:
            h = F.LeakyReLU(layer(h), slope=0.2)
        return F.tanh(self.pixels(h))


class Discriminator(gluon.HybridBlock):
    def __init__(self, hidden, dropout=0.3, **kwargs):
        super().__init__(**kwargs)
        self.dropout = dropout
        with self.name_scope():
            self.hidden = gluon.nn.Dense(2 * hidden, in_units=64)
            self.hidden2 = gluon.nn.Dense(hidden, in_units=2 * hidden)
            self.score = gluon.nn.Dense(1, in_units=hidden)

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
