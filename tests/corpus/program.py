"""What a corpus program is: a model as its package builds it, the inputs it is
given and the calls its user makes, declared, so that the corpus test and
`make corpus` run every program the same way.

A program's calls are its inference calls (`infer`, `inference_calls` of them,
each on new arrays) then `train_steps` training steps (`loss` under
autograd.record(), backward, an optimizer step). Each declares the method of the
model it goes through (`infer_method`, `train_method`): methods other than
`forward` are hybridized with `hybridize(dynamic=True, methods=...)` and their
calls count as the forward's do.
"""
import contextlib
import dataclasses
import random
from typing import Callable, Optional

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

SEED = 7


@dataclasses.dataclass(frozen=True)
class Program:
    """One corpus program.

    `build()`: the model, parameters initialized as its package does (pretrained=False),
    called under fixed seeds. `inputs(call)`: the arguments of inference call `call` (new
    arrays, the same values for the same number). `infer(model, *arguments)`: what the
    user calls on them (by default, the model). `batch(step)`: the arguments of training
    step `step`; `loss(model, *batch)`: the step's loss, as the package computes it (the
    model called inside). `optimizer(model)`: a function making one update after
    backward (a gluon.Trainer's SGD step, learning rate 0.001, by default).
    """
    name: str
    package: str          # "gluoncv", "gluonnlp", "d2l" (as installed), or "written here"
    covers: str           # what the program stands for in the corpus
    build: Callable
    inputs: Callable
    infer: Callable = None
    infer_method: str = "forward"
    batch: Optional[Callable] = None
    loss: Optional[Callable] = None
    train_method: str = "forward"
    optimizer: Callable = None
    inference_calls: int = 6
    train_steps: int = 3
    numpy_interface: bool = False   # d2l: MXNet's numpy interface (npx.set_np()) while it runs
    # Timed training steps each start from the initial parameters (restored in place,
    # in every variant): a loss that matches targets by argmax (SSD's box matching)
    # takes other branches once rounding differences have grown over a few updates,
    # and the variants' losses could no longer be checked against each other.
    steps_from_initial_parameters: bool = False

    def make(self):
        """The model built; parameters whose shapes Gluon defers get them from a first
        call on inputs(0), as a user's first call gives them."""
        model = self.build()
        if any(param._deferred_init for param in   # pylint: disable=protected-access
               model.collect_params().values()):
            with autograd.pause():
                self.call(model, *self.inputs(0))
        return model

    def call(self, model, *arguments):
        """One inference call."""
        if self.infer is not None:
            return self.infer(model, *arguments)
        return model(*arguments)

    def updater(self, model):
        """A function making one optimizer update of `model`'s parameters."""
        if self.optimizer is not None:
            return self.optimizer(model)
        # A small step: a random model's loss landscape is steep, and a large step
        # would magnify float rounding (a graph sums in another order) step after step.
        trainer = gluon.Trainer(model.collect_params(), "sgd", {"learning_rate": 0.001})
        return lambda: trainer.step(1)

    @property
    def entry_points(self):
        """The methods of the model the program calls ("forward" among them, if so)."""
        return tuple(sorted({self.infer_method} | ({self.train_method} if self.loss else set())))

    @property
    def methods(self):
        """The methods other than forward the program calls: hybridize's `methods=`."""
        return tuple(name for name in self.entry_points if name != "forward")

    def scope(self):
        """The array interface the program runs under (d2l's is MXNet's numpy one)."""
        if not self.numpy_interface:
            return contextlib.nullcontext()
        stack = contextlib.ExitStack()
        stack.enter_context(mx.util.np_shape(True))
        stack.enter_context(mx.util.np_array(True))
        return stack


def seeded(seed=SEED):
    """Seeds every random generator a package may draw from (Python, numpy, MXNet)."""
    random.seed(seed)
    np.random.seed(seed)
    mx.random.seed(seed)


def uniform(shape, call, low=0.0, high=1.0):
    """A new float32 array of uniform values, the same for the same `call`."""
    values = np.random.RandomState(1000 + call).uniform(low, high, shape)
    return mx.nd.array(values, dtype="float32")


def integers(shape, call, high, low=0, dtype="float32"):
    """A new array of integers in [low, high), the same for the same `call`."""
    values = np.random.RandomState(2000 + call).randint(low, high, shape)
    return mx.nd.array(values, dtype=dtype)


def as_np(array):
    """A legacy NDArray as an array of MXNet's numpy interface (d2l's programs)."""
    return array.as_np_ndarray()
