"""Run a generated program imperatively and with hybridize(dynamic=True); compare.

Both copies get the same parameters and the same calls: random batch sizes and
values (to flip tensor branches), trip-count inputs, and `self.flag`/`self.n`
changed between calls. Outputs, gradients (inputs and parameters) and the Python
state the forward mutates (`count`, `state`) must agree (allclose 1e-5), call
after call; exceptions must agree in type and in the first line of the message.
A trace stopped by an internal error is a disagreement too, even when the call
then ran correctly as Python. Each check also says how many calls graphs served.
A disagreement is kept as a program file (`failure_file`): its source headed by
the problem and the calls, which `check_file` runs again.

Some generated calls are ill-conditioned: the imperative result itself jumps when
the input moves by an ulp (a `max` whose rows became equal in float32, a sum that
cancels). A graph may round differently within tolerance, so such a call can
differ without a bug. A numeric difference is therefore checked against the
imperative program's own sensitivity: if inputs moved by an ulp change the
imperative result by at least a tenth as much as the graph's difference, the call
counts as ill-conditioned, not as a disagreement, and the checking of that
program stops there (its later state is no longer comparable).
"""
import ast
import dataclasses
import importlib.util
import os
import random
import tempfile
import time
import warnings

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

import gluon_dyn  # noqa: F401  (enables hybridize(dynamic=True))

from . import programs

TOLERANCE = dict(rtol=1e-5, atol=1e-5)
# Ill-conditioning: the relative size of the input moves, how many are tried, and
# how much of a difference the imperative program's own moves must explain.
ULP_MOVE = 2e-7
MOVES = 8
EXPLAINED_SHARE = 0.1
CALLS = 6
# In a program file (failure_file), the comment line giving its calls starts so.
CALLS_LINE = "# calls: "
# The suite's short runs: two profiled calls, graphs kept even where Python is
# faster (tiny programs), so that they exercise the graph machinery.
SHORT_RUN_OPTIONS = dict(profile_calls=2, check_speed=False)
# Calls as training steps ("step" in a call): three calls and a loss on each result,
# their calls batched (batch_calls=True: one graph where they have no other effect).
STEP_OPTIONS = dict(SHORT_RUN_OPTIONS, batch_calls=True)


class SquaredSum(gluon.HybridBlock):
    """A step's loss: a HybridBlock applied to a call's result joins its batch."""

    def hybrid_forward(self, F, value):  # pylint: disable=arguments-differ
        return F.sum(F.square(value))


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


def calls_for(seed, count=CALLS, steps=False):
    """The calls of `seed`; `steps`: each a training step of three calls (STEP_OPTIONS)."""
    rng = random.Random(seed)
    calls = [{"batch": rng.choice((2, 3)), "scale": rng.choice((-2.0, -0.5, 0.5, 2.0)),
              "limit": rng.randint(0, 3), "flag": rng.random() < 0.7, "n": rng.choice((1, 2)),
              "train": rng.random() < 0.6, "seed": rng.randrange(10 ** 6)}
             for _ in range(count)]
    for call in calls if steps else ():
        call["step"] = True
        call["loss"] = rng.choice(("squared sum", "sigmoid bce"))
    return calls


@dataclasses.dataclass
class Outcome:
    """One program checked: the first disagreement (None if none) and the dynamic
    block's report ("calls" says how each call was served)."""
    problem: object
    report: dict = None
    ill_conditioned: str = None
    dtype: str = "float32"     # of the program's arrays

    @property
    def calls_after_profiling(self):
        return self.report["calls"]["after_profiling"] if self.report else 0

    @property
    def graph_calls(self):
        return self.report["calls"]["graph"] if self.report else 0

    @property
    def batched_calls(self):
        return self.report["calls"]["by_kind"]["batched"] if self.report else 0

    @property
    def merged_losses(self):
        batched = self.report.get("batched_calls") if self.report else None
        return batched["loss_calls_merged"] if batched else 0

    @property
    def ended_on_graph(self):
        """The last call ran on a graph, or on graph segments around graph breaks."""
        return bool(self.report) and self.report["calls"]["last"] in ("graph", "segments")


def check(program, call_seed, calls=CALLS, options=None, steps=False):
    """Run `program` on the calls of `call_seed` both ways (`steps`: as training
    steps of three calls); `options` are the dynamic block's hybridize options
    (SHORT_RUN_OPTIONS, or STEP_OPTIONS for steps, unless given; {} for hybridize's
    defaults). A shrinking step can leave `break` outside its loop: such a program
    is not a candidate (no problem, no report)."""
    return check_source(programs.render(program), calls_for(call_seed, calls, steps), options)


def check_source(source, calls, options=None):
    """Run the Program class of `source` on `calls` both ways (as `check`)."""
    try:
        cls = load(source)
    except SyntaxError:
        return Outcome(None)
    if options is None:
        options = STEP_OPTIONS if any(call.get("step") for call in calls) else SHORT_RUN_OPTIONS
    mx.random.seed(0)
    imperative, dynamic = cls(), cls()
    for block in (imperative, dynamic):
        block.initialize(mx.init.Uniform(0.5))
        block.cast(_dtype(block))
    for (_, a), (_, b) in zip(sorted(imperative.collect_params().items()),
                              sorted(dynamic.collect_params().items())):
        b.set_data(a.data())
    dynamic.hybridize(dynamic=True, **options)
    problem = ill_conditioned = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for index, call in enumerate(calls):
            before = _state(imperative)
            expected, got = _run(imperative, call), _run(dynamic, call)
            problem = _compare(expected, got)
            if problem and _explained_by_conditioning(imperative, before, call, expected, got):
                ill_conditioned, problem = "call %d %s: %s" % (index, call, problem), None
                break
            if problem:
                problem = "call %d %s: %s" % (index, call, problem)
                break
    report = gluon_dyn.hybridize.report(dynamic)
    if problem is None and report["internal_errors"]:
        problem = "a trace stopped on an internal error: %s" % report["internal_errors"][0]
    return Outcome(problem, report, ill_conditioned, _dtype(dynamic))


def check_file(path):
    """`check_source` of a program file `failure_file` wrote, on its calls."""
    with open(path) as f:
        text = f.read()
    return check_source(text, _recorded_calls(text))


def failure_file(problem, source, calls):
    """The text of a program file: `source` after comment lines giving `problem`
    and `calls` (the call dicts, as calls_for gives them)."""
    problem_lines = "".join("# %s\n" % line for line in str(problem).splitlines())
    return "%s%s%r\n%s" % (problem_lines, CALLS_LINE, calls, source)


def _recorded_calls(text):
    lines = [line for line in text.splitlines() if line.startswith(CALLS_LINE)]
    if len(lines) != 1:
        raise ValueError("a program file has one %r line; this one has %d"
                         % (CALLS_LINE, len(lines)))
    return ast.literal_eval(lines[0][len(CALLS_LINE):])


def disagreement(program, call_seed, steps=False):
    """The first disagreement of `program` on the calls of `call_seed`, or None."""
    return check(program, call_seed, steps=steps).problem


def _run(block, call, move=None):
    """The call's results on `block`; `move` seeds a relative ULP_MOVE of the input."""
    block.flag, block.n = call["flag"], call["n"]
    rng = np.random.RandomState(call["seed"])
    values = rng.randn(call["batch"], 4) * call["scale"]
    if move is not None:
        values *= 1 + ULP_MOVE * np.random.RandomState(move).randn(*values.shape)
    x = mx.nd.array(values, dtype=_dtype(block))
    x.attach_grad()
    block.collect_params().zero_grad()
    # Programs with a dropout in training calls (regressions/) draw alike. Graphs draw in
    # their own order, and not at all for a result nothing reads: generated programs
    # draw nothing (docs/guide/speculation.md).
    mx.random.seed(call["seed"])
    limit = mx.nd.array([call["limit"]])
    try:
        with autograd.record(train_mode=call["train"]):
            if call.get("step"):
                half, quarter = x * 0.5, x * 0.25
                loss = SquaredSum()
                # A call with new Python values (flag, n) runs alone, traced; the
                # later ones join a batch with the losses on their results, which
                # the `+` runs.
                out, again, third = block(x, limit), block(half, limit), block(quarter, limit)
                if call.get("loss") == "sigmoid bce":
                    # Gluon's SigmoidBCE on each result (gradients within 1, as
                    # SquaredSum's stay moderate): the batch makes them one call on
                    # their rows (rowwise_losses.py). Targets made from NumPy, and
                    # shapes known before the batch runs, do not run it.
                    bce = gluon.loss.SigmoidBinaryCrossEntropyLoss()
                    values = [bce(value, mx.nd.array(np.full(value.shape, 0.5),
                                                     dtype=value.dtype))
                              for value in (again, third, out)]
                    total = mx.nd.add_n(*[value.sum() for value in values])
                else:
                    total = loss(again) + loss(third) + loss(out)
                outputs = (out, again, third, total)
            else:
                total = out = block(x, limit)
                outputs = (out,)
        total.backward()
        output = np.concatenate([value.asnumpy().reshape(-1) for value in outputs])
    except Exception as error:  # noqa: BLE001 - the exception itself is compared
        return ("raised", type(error).__name__, str(error).strip().splitlines()[:1])
    grads = {name[len(block.prefix):]: p.grad().asnumpy() for name, p in
             block.collect_params().items()}
    return ("ok", output, x.grad.asnumpy(), grads, block.count, block.state.asnumpy(),
            block.total)


def _dtype(block):
    """The dtype of a program's arrays (programs.Program.dtype; float32 in program
    files written before programs had one)."""
    return getattr(type(block), "DTYPE", "float32")


def _state(block):
    return block.count, block.total, block.state.copy()


def _set_state(block, state):
    block.count, block.total, block.state = state[0], state[1], state[2].copy()


def _explained_by_conditioning(block, before, call, expected, got):
    """Whether `block` (the imperative copy, `before` its state ahead of the call)
    moves as much as `got` differs from `expected` when its input moves by an ulp."""
    difference = _distance(expected, got)
    if difference is None:
        return False
    after = _state(block)
    try:
        moves = []
        for move in range(MOVES):
            _set_state(block, before)
            moves.append(_distance(expected, _run(block, call, move)))
    finally:
        _set_state(block, after)
    return any(m is not None and m >= EXPLAINED_SHARE * difference for m in moves)


def _distance(expected, got):
    """The largest difference of two "ok" results in tolerance units (inf where a
    count differs), or None when either raised."""
    if expected[0] != "ok" or got[0] != "ok":
        return None
    pairs = list(zip(expected[1:3], got[1:3])) + [
        (grad, got[3][param]) for param, grad in expected[3].items()] + [
        (expected[5], got[5]), (np.float64(expected[6]), np.float64(got[6]))]
    if expected[4] != got[4] or any(np.shape(e) != np.shape(g) for e, g in pairs):
        return np.inf
    return max(float(np.max(np.abs(e - g) / (TOLERANCE["atol"] + TOLERANCE["rtol"] * np.abs(e)),
                        initial=0.0)) for e, g in pairs)


def _compare(expected, got):
    if expected[0] != got[0] or expected[0] == "raised":
        return None if expected == got else "imperative %s, dynamic %s" % (
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
    if not np.isclose(expected[6], got[6], **TOLERANCE):
        return "self.total: imperative %s, dynamic %s" % (expected[6], got[6])
    return None


class Coverage:
    """What a run of checks covered: programs, disagreements, and how much ran on graphs."""

    def __init__(self):
        self.programs = self.disagreed = self.ended_on_graph = self.ill_conditioned = 0
        self.calls_after_profiling = self.graph_calls = self.batched_calls = 0
        self.merged_losses = 0
        self.float64 = Float64Coverage()

    def add(self, outcome):
        self.programs += 1
        self.disagreed += outcome.problem is not None
        self.ill_conditioned += outcome.ill_conditioned is not None
        self.ended_on_graph += outcome.ended_on_graph
        self.calls_after_profiling += outcome.calls_after_profiling
        self.graph_calls += outcome.graph_calls
        self.batched_calls += outcome.batched_calls
        self.merged_losses += outcome.merged_losses
        if outcome.dtype == "float64":
            self.float64.add(outcome)

    @property
    def program_share(self):
        return _share(self.ended_on_graph, self.programs)

    @property
    def call_share(self):
        return _share(self.graph_calls, self.calls_after_profiling)

    def summary(self):
        return ("%.0f%% of programs and %.0f%% of calls after profiling on graphs (%d in "
                "batches' graphs, %d loss calls merged by rows; %d float64 programs, %.0f%% "
                "of their calls on graphs), %d disagreed (%d stopped at an ill-conditioned "
                "call)" % (
                    100 * self.program_share, 100 * self.call_share, self.batched_calls,
                    self.merged_losses, self.float64.programs, 100 * self.float64.call_share,
                    self.disagreed, self.ill_conditioned))


class Float64Coverage:
    """The calls of float64 programs, and how many graphs served."""

    def __init__(self):
        self.programs = self.calls_after_profiling = self.graph_calls = 0

    def add(self, outcome):
        self.programs += 1
        self.calls_after_profiling += outcome.calls_after_profiling
        self.graph_calls += outcome.graph_calls

    @property
    def call_share(self):
        return _share(self.graph_calls, self.calls_after_profiling)


def _share(part, whole):
    return part / whole if whole else 0.0


def shrink(program, call_seed, until=None, steps=False):
    """A smallest program (by removing statements) that still disagrees; past
    `until` (a time.time()), the smallest found so far."""
    smaller = True
    while smaller:
        smaller = False
        for candidate in programs.shrink_candidates(program):
            if until is not None and time.time() >= until:
                return program
            if disagreement(candidate, call_seed, steps):
                program, smaller = candidate, True
                break
    return program
