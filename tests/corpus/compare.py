"""A corpus program run twice, as written and through hybridize(dynamic=True), call
by call on the same arguments: `run_twins` asserts that both compute the same
(outputs, losses, gradients, parameters after each optimizer step, Python state
left on the blocks) and says how the dynamic one was served (`Figures`).

Gradients and parameters agree to 1e-5 of their largest magnitude, since graphs
may sum a batch's gradient in another order; where a gradient's terms cancel, a
HybridBlock's may differ as much as MXNet's own graph of it does. Each training
step starts both models from the same parameters.

A difference raises `Wrong`, naming the program, the call and what differed: a
wrong number from a graph is never recorded as a program's state.
"""
import dataclasses
import re
import warnings
from typing import List, Optional

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

import gluon_dyn
from dynamic_twins import (ATOL, assert_same, copy_parameters, gradients, graph_figures,
                           parameter_values, python_state, twins)

from .program import SEED, seeded

# Statuses, best first.
STATUSES = ("graphs", "python", "fallback", "internal_error")


class Wrong(AssertionError):
    """The dynamic run of a program differs from the run as written."""


@dataclasses.dataclass
class Figures:
    """How the dynamic run of a program was served."""
    status: str              # one of STATUSES
    calls: int               # calls after profiling, those through other methods included
    on_graphs: int           # of which graphs served
    graphs: int              # graphs (and compiled recursive bodies) kept
    graph_breaks: List[dict]
    fallbacks: List[str]
    internal_errors: List[str]

    @property
    def share(self) -> Optional[float]:
        return self.on_graphs / self.calls if self.calls else None

    def expected(self):
        """What the expected file keeps of these figures."""
        return {"status": self.status,
                "share_on_graphs": None if self.share is None else round(self.share, 4),
                "graph_breaks": len(self.graph_breaks), "graphs": self.graphs}

    def cause(self):
        """Why calls ran as Python, in a line: the first internal error, fallback or
        graph break."""
        breaks = ["graph break at %s: %s" % (each["at"], each["why"])
                  for each in self.graph_breaks]
        for reason in self.internal_errors + self.fallbacks + breaks:
            # Paths from the installed package on: the same on every machine.
            return re.sub(r"\S*/site-packages/", "", reason.splitlines()[0] if reason else reason)
        return ""


def run_twins(program, options=None):
    """Runs `program` as written and dynamically (`options`: of the dynamic block's
    hybridize, whose `methods=` are the program's); (imperative model, dynamic model,
    Figures). Raises Wrong."""
    with program.scope(), warnings.catch_warnings():
        warnings.simplefilter("ignore")   # gluon_dyn's "runs imperatively" warnings: in Figures
        imperative, dynamic = twins(program.make, seed=SEED, initialized=True,
                                    **dict(options or {}, methods=program.methods))
        _check(program, "after building", _state(dynamic), _state(imperative))
        for call in range(program.inference_calls):
            outputs = [_infer(program, model, call) for model in (imperative, dynamic)]
            _check(program, "inference call %d" % call, outputs[1], outputs[0])
        if program.loss is not None:
            updaters = [program.updater(model) for model in (imperative, dynamic)]
            for step in range(program.train_steps):
                # Training transforms draw random augmentations: one batch, given to both.
                seeded(SEED + step)
                batch = program.batch(step)
                (loss, grads, state), (loss_d, grads_d, state_d) = [
                    _train(program, model, batch) for model in (imperative, dynamic)]
                _check(program, "the loss of training step %d" % step, loss_d, loss)
                _check_gradients(program, step, grads_d, grads, imperative, batch)
                _check(program, "the Python state after training step %d" % step,
                       state_d, state)
                for update in updaters:
                    update()
                _check(program, "the parameters after training step %d" % step,
                       parameter_values(dynamic), parameter_values(imperative), scaled=True)
                # Each step starts from the same parameters: a step's differences in the
                # last bits (the order a graph sums gradients in) are not carried into
                # the next, where a model's own sensitivity would magnify them.
                copy_parameters(imperative, dynamic)
        mx.nd.waitall()
    return imperative, dynamic, figures(program, dynamic)


def _infer(program, model, call):
    arguments = program.inputs(call)
    seeded(SEED + call)   # random operators draw the same numbers in both runs
    with autograd.pause():
        outputs = program.call(model, *arguments)
    return outputs, _state(model)


def _train(program, model, batch):
    seeded(SEED)
    with autograd.record():
        loss = program.loss(model, *_copied(batch))
    loss.backward()
    return loss, gradients(model), python_state(model)


def _copied(value):
    """New arrays of the same values, in the same structure."""
    if isinstance(value, (list, tuple)):
        return type(value)(_copied(item) for item in value)
    return value.copy() if isinstance(value, mx.nd.NDArray) else value


def _state(model):
    return {"parameters": parameter_values(model), "python state": python_state(model)}


def _check_gradients(program, step, got, expected, imperative, batch):
    """Gradients agree; or, for a HybridBlock, differ from the imperative ones no more
    than MXNet's own graph of the model does (hybridize(), same parameters, same
    batch). A graph sums a gradient's terms in another order than autograd does, and
    where they cancel (a BatchNorm's gamma over a 64x64 map) that shows at 1e-5."""
    what = "the gradients of training step %d" % step
    try:
        assert_same(got, expected, what, atol=ATOL, scaled=True)
        return
    except AssertionError as error:
        if not isinstance(imperative, gluon.HybridBlock):
            raise Wrong("%s: the dynamic run differs from the run as written at %s:\n%s"
                        % (program.name, what, error)) from None
    with program.scope():
        seeded(SEED)
        graph = program.make()
    copy_parameters(imperative, graph)
    graph.hybridize()
    _, by_mxnet, _ = _train(program, graph, batch)
    for name, wanted in expected.items():
        wanted = wanted.asnumpy()
        band = np.abs(by_mxnet[name].asnumpy() - wanted) + \
            ATOL * max(1.0, float(np.abs(wanted).max()) if wanted.size else 1.0)
        excess = np.abs(got[name].asnumpy() - wanted) - band
        if (excess > 0).any():
            raise Wrong("%s: the dynamic run differs from the run as written at %s, gradient "
                        "%s, by more than MXNet's own graph does (by up to %g)"
                        % (program.name, what, name, float(excess.max())))


def _check(program, what, got, expected, scaled=False):
    try:
        assert_same(got, expected, what, atol=ATOL, scaled=scaled)
    except AssertionError as error:
        raise Wrong("%s: the dynamic run differs from the run as written at %s:\n%s"
                    % (program.name, what, error)) from None


def figures(program, dynamic):
    """Figures of the dynamic model after the program ran: its calls are those of
    the runners of the methods it calls (the forward's, and those of `methods=`)."""
    made = gluon_dyn.hybridize.report(dynamic)
    found = graph_figures(made)
    served = [made["calls"] if name == "forward" else made["methods"][name]["calls"]
              for name in program.entry_points]
    on_graphs = sum(calls["graph"] for calls in served)
    counted = sum(calls["after_profiling"] for calls in served)
    if found["internal_errors"]:
        status = "internal_error"
    elif found["fallbacks"]:
        status = "fallback"
    elif on_graphs:
        status = "graphs"
    else:
        status = "python"
    return Figures(status=status, calls=counted, on_graphs=on_graphs, graphs=found["graphs"],
                   graph_breaks=found["graph_breaks"], fallbacks=found["fallbacks"],
                   internal_errors=found["internal_errors"])
