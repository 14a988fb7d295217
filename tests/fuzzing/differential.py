"""Run a generated program imperatively and with hybridize(dynamic=True); compare.

Both copies get the same parameters and the same calls: random batch sizes and
values (to flip tensor branches), trip-count inputs, and `self.flag`/`self.n`
changed between calls. Outputs, gradients (inputs and parameters) and the Python
state the forward mutates (`count`, `state`) must agree (allclose 1e-5), call
after call. Exceptions must agree too.
"""
import importlib.util
import os
import random
import tempfile
import warnings

import mxnet as mx
import numpy as np
from mxnet import autograd

import gluon_dyn  # noqa: F401  (enables hybridize(dynamic=True))

from . import programs

TOLERANCE = dict(rtol=1e-5, atol=1e-5)


def load(source):
    """The Program class of `source` (written to a file: conversion reads source files)."""
    handle, path = tempfile.mkstemp(suffix=".py", prefix="gluon_dyn_program_")
    with os.fdopen(handle, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Program


def random_case(rng):
    """A (program seed, call seed) pair: one generated program and its calls."""
    return rng.randrange(10 ** 9), rng.randrange(10 ** 9)


def calls_for(seed, count=6):
    rng = random.Random(seed)
    return [{"batch": rng.choice((2, 3)), "scale": rng.choice((-2.0, -0.5, 0.5, 2.0)),
             "limit": rng.randint(0, 3), "flag": rng.random() < 0.7, "n": rng.choice((1, 2)),
             "train": rng.random() < 0.6, "seed": rng.randrange(10 ** 6)}
            for _ in range(count)]


def _run(block, call):
    block.flag, block.n = call["flag"], call["n"]
    rng = np.random.RandomState(call["seed"])
    x = mx.nd.array(rng.randn(call["batch"], 4) * call["scale"])
    x.attach_grad()
    block.collect_params().zero_grad()
    try:
        with autograd.record(train_mode=call["train"]):
            out = block(x, mx.nd.array([call["limit"]]))
        out.backward()
    except Exception as error:  # noqa: BLE001 - the exception itself is compared
        # The message's last line is for the report only; types are compared.
        return ("raised", type(error).__name__, str(error).strip().splitlines()[-1:])
    grads = {name[len(block.prefix):]: p.grad().asnumpy() for name, p in
             block.collect_params().items()}
    return ("ok", out.asnumpy(), x.grad.asnumpy(), grads, block.count, block.state.asnumpy())


def disagreement(program, call_seed, reports=None):
    """None if the two runs agree on every call, else a description of the first difference.
    (A shrinking step can leave `break` outside its loop: such a program is not a candidate.)
    The dynamic block's report is appended to `reports` if given."""
    try:
        cls = load(programs.render(program))
    except SyntaxError:
        return None
    mx.random.seed(0)
    imperative, dynamic = cls(), cls()
    for block in (imperative, dynamic):
        block.initialize(mx.init.Uniform(0.5))
    for (_, a), (_, b) in zip(sorted(imperative.collect_params().items()),
                              sorted(dynamic.collect_params().items())):
        b.set_data(a.data())
    # Tiny programs: keep their graphs even where Python would be faster.
    dynamic.hybridize(dynamic=True, profile_calls=2, check_speed=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for index, call in enumerate(calls_for(call_seed)):
            expected, got = _run(imperative, call), _run(dynamic, call)
            problem = _compare(expected, got)
            if problem:
                return "call %d %s: %s" % (index, call, problem)
    if reports is not None:
        reports.append(gluon_dyn.hybridize.report(dynamic))
    return None


def _compare(expected, got):
    if expected[0] != got[0] or expected[0] == "raised":
        return None if expected[:2] == got[:2] else "imperative %s, dynamic %s" % (
            expected[:3] if expected[0] == "raised" else expected[:2],
            got[:3] if got[0] == "raised" else got[:2])
    names = ("output", "input gradient")
    for name, e, g in zip(names, expected[1:3], got[1:3]):
        if e.shape != g.shape or not np.allclose(e, g, **TOLERANCE):
            return "%s differs: max |diff| %s" % (
                name, np.abs(e - g).max() if e.shape == g.shape else (e.shape, g.shape))
    for param, grad in expected[3].items():
        if not np.allclose(grad, got[3][param], **TOLERANCE):
            return "gradient of %s differs" % param
    if expected[4] != got[4]:
        return "self.count: imperative %s, dynamic %s" % (expected[4], got[4])
    if not np.allclose(expected[5], got[5], **TOLERANCE):
        return "self.state differs"
    return None


def shrink(program, call_seed):
    """A smallest program (by removing statements) that still disagrees."""
    smaller = True
    while smaller:
        smaller = False
        for candidate in programs.shrink_candidates(program):
            if disagreement(candidate, call_seed):
                program, smaller = candidate, True
                break
    return program
