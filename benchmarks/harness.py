"""The benchmark rules, in one place, for every benchmark in this folder.

A benchmark describes its program as `Variant`s (the imperative reference first)
and a function `make_inputs(call)` giving the arguments of call number `call`:
new arrays at every call, the same values for the same call number, so every
variant of one call computes the same thing. Then:

- `compare` warms up every variant (calls interleaved, each output checked
  against the reference's output of the same call), then times `repeats` calls
  of each, interleaved (A, B, C, A, B, C, ...) on inputs all made before the
  first timed call, and gives each variant's times (medians for the tables);
- `run_calls` does the same for a fixed sequence of calls whose every call
  matters (a guard that fails at call 9), checking every call;
- `print_table` prints a markdown table under the command line that produced it.

PyTorch variants (`import_torch`, `torch_parameters`, `torch_call`) run only
when torch is installed (`make bench-extra`); benchmarks leave their rows out
otherwise.
"""
import dataclasses
import os
import shlex
import statistics
import sys
from typing import Any, Callable, Dict, List, Sequence

import mxnet as mx
import numpy as np
from mxnet import autograd

from gluon_dyn.hybridize import report
from gluon_dyn.measure import CONFIRMATIONS, MIN_SAMPLES, timed_ms

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Calls before timing starts: hybridize(dynamic=True) profiles 3 calls, traces on
# the 4th, then its speed check alternates graph and Python until each has
# MIN_SAMPLES timings, CONFIRMATIONS times over, before the graph serves every call.
WARMUP = 4 + 2 * MIN_SAMPLES * CONFIRMATIONS


def _same(arguments):
    return arguments


@dataclasses.dataclass
class Variant:
    """One way to run the benchmarked program.

    `run(*arguments)` computes one call and returns its output(s) (MXNet work it
    queued is waited for inside the timed region). `prepare(arguments)` turns the
    arguments `make_inputs` gave into this variant's own (NDArrays into torch
    tensors), before any timing. Outputs must match the reference's to
    rtol/atol."""
    name: str
    run: Callable
    prepare: Callable = _same
    rtol: float = 1e-4
    atol: float = 1e-5


@dataclasses.dataclass
class Timing:
    """Milliseconds per call of one variant: warm-up calls and timed calls."""
    warmup_ms: List[float]
    timed_ms: List[float]

    @property
    def median_ms(self):
        return statistics.median(self.timed_ms)


class OutputMismatch(AssertionError):
    """A variant computed something else than the reference: its times mean nothing."""


def as_numpy(output):
    """An output (NDArray, torch tensor, numpy array, or a list/tuple of them) as
    a list of numpy arrays."""
    if isinstance(output, (list, tuple)):
        return [array for item in output for array in as_numpy(item)]
    if hasattr(output, "asnumpy"):
        return [output.asnumpy()]
    if hasattr(output, "detach"):  # torch.Tensor
        return [output.detach().cpu().numpy()]
    return [np.asarray(output)]


def check_output(variant, output, expected, call, reference):
    """Raises OutputMismatch unless `output` matches `expected` (numpy arrays)."""
    got = as_numpy(output)
    where = "variant %r, call %d, against %r" % (variant.name, call, reference)
    if len(got) != len(expected):
        raise OutputMismatch("%s: %d outputs, expected %d" % (where, len(got), len(expected)))
    for index, (actual, wanted) in enumerate(zip(got, expected)):
        if actual.shape != wanted.shape:
            raise OutputMismatch("%s: output %d has shape %s, expected %s"
                                 % (where, index, actual.shape, wanted.shape))
        if not np.allclose(actual, wanted, rtol=variant.rtol, atol=variant.atol):
            raise OutputMismatch("%s: output %d differs by up to %.3g (rtol %g, atol %g)" % (
                where, index, float(np.max(np.abs(actual - wanted))), variant.rtol,
                variant.atol))


def _made(variants, make_inputs, calls):
    """Each variant's own prepared arguments for each call number, made now."""
    if not variants:
        raise ValueError("no variants to run")
    made = {v.name: [v.prepare(tuple(make_inputs(call))) for call in calls] for v in variants}
    mx.nd.waitall()  # making inputs queues MXNet work: not part of any call
    return made


def _round(variants, arguments, call, check):
    """One call of every variant in turn; milliseconds of each, in order."""
    times, expected = [], None
    for variant in variants:
        output, ms = timed_ms(lambda: variant.run(*arguments[variant.name]))
        times.append(ms)
        if check and expected is None:
            expected = as_numpy(output)
        elif check:
            check_output(variant, output, expected, call, variants[0].name)
    return times


def _measuring(variants):
    """Names of the variants whose speed check is measuring (gluon_call's blocks)."""
    return [v.name for v in variants if getattr(v.run, "measuring", lambda: False)()]


def run_calls(variants: Sequence[Variant], make_inputs, calls: int, check=True):
    """Calls 0..calls-1 of every variant, interleaved, on inputs made before the
    first call; with `check`, every output is checked against variants[0]'s.
    Returns {name: [ms of each call]}."""
    made = _made(variants, make_inputs, range(calls))
    times = {v.name: [] for v in variants}
    for call in range(calls):
        round_ms = _round(variants, {name: args[call] for name, args in made.items()}, call,
                          check)
        for variant, ms in zip(variants, round_ms):
            times[variant.name].append(ms)
    return times


def compare(variants: Sequence[Variant], make_inputs, repeats: int,
            warmup: int = WARMUP) -> Dict[str, Timing]:
    """`warmup` checked calls then `repeats` timed calls of every variant, interleaved.

    Warm-up calls are numbered 0..warmup-1 and their inputs are made one round at
    a time; the timed calls (numbered on from there) get inputs all made before
    the first of them and kept alive to the end, so no array is ever passed twice.
    """
    if warmup < 1 or repeats < 1:
        raise ValueError("need warmup >= 1 (outputs are checked there) and repeats >= 1, "
                         "got %d and %d" % (warmup, repeats))
    warmup_ms = {v.name: [] for v in variants}
    call = 0
    # Past `warmup`, calls go on (up to as many again) while a dynamic block still
    # measures its speed check: a timed call that ran the forward as written
    # would time the check, not the choice it makes.
    while call < warmup or (_measuring(variants) and call < 2 * warmup):
        arguments = {name: args[0] for name, args in _made(variants, make_inputs, [call]).items()}
        for variant, ms in zip(variants, _round(variants, arguments, call, check=True)):
            warmup_ms[variant.name].append(ms)
        call += 1
    if _measuring(variants):
        print("still measuring their speed checks after %d warm-up calls: %s"
              % (call, ", ".join(_measuring(variants))), file=sys.stderr)
    calls = range(call, call + repeats)
    made = _made(variants, make_inputs, calls)
    timed = {v.name: [] for v in variants}
    for index, call in enumerate(calls):
        arguments = {name: args[index] for name, args in made.items()}
        for variant, ms in zip(variants, _round(variants, arguments, call, check=False)):
            timed[variant.name].append(ms)
    return {v.name: Timing(warmup_ms[v.name], timed[v.name]) for v in variants}


def normal_array(shape, call):
    """A new NDArray of standard normal values, the same values for the same `call`."""
    return mx.nd.array(np.random.RandomState(call).standard_normal(shape), dtype="float32")


def gluon_call(net, train=False):
    """`run` for a Gluon block: inference, or forward under autograd.record() and
    backward (head gradient of ones); returns the forward's output."""
    def run(*arguments):
        if not train:
            return net(*arguments)
        with autograd.record():
            out = net(*arguments)
        out.backward()
        return out

    def measuring():
        """Whether the block's calls still go through its speed check's measurement
        (calls the recursion engine serves never do)."""
        try:
            made = report(net)
        except ValueError:   # not hybridized with dynamic=True
            return False
        return made["speed_check"]["state"].startswith("measuring") and \
            made["calls"]["last"] in ("graph", "speed_check")
    run.measuring = measuring
    return run


def copy_params(source, *targets):
    """Gives every target block the parameter values of `source` (same structure)."""
    values = source._collect_params_with_prefix()  # pylint: disable=protected-access
    for target in targets:
        params = target._collect_params_with_prefix()  # pylint: disable=protected-access
        if sorted(params) != sorted(values):
            raise ValueError("%s and %s have different parameters" % (
                type(source).__name__, type(target).__name__))
        for name, param in params.items():
            param.set_data(values[name].data().copy())


def twins(make):
    """Two blocks `make()` made, initialised (Xavier), hybridized (static_alloc,
    static_shape) and given equal parameter values, each in arrays of its own: a
    compiled variant must not share the reference's weights, since oneDNN keeps a
    convolution weight in a blocked layout inside the array's memory and TVM reads
    it back in the plain one (shared, both would re-lay it out at every call)."""
    blocks = make(), make()
    for block in blocks:
        block.initialize(mx.init.Xavier())
        block.hybridize(static_alloc=True, static_shape=True)
    copy_params(*blocks)
    return blocks


def import_torch():
    """torch, with a thread per available CPU, or None (PyTorch rows need `make bench-extra`)."""
    try:
        import torch  # pylint: disable=import-outside-toplevel
    except ImportError:
        print("PyTorch is not installed: its rows are left out (`make bench-extra` adds them)")
        return None
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    return torch


def torch_parameters(torch, pairs):
    """Copies Gluon parameter values into torch parameters: `pairs` of
    (torch parameter, gluon Parameter), same layouts (Dense/Linear weights are
    (out, in) in both; LSTM gates are in the same order)."""
    with torch.no_grad():
        for torch_param, gluon_param in pairs:
            torch_param.copy_(torch.from_numpy(gluon_param.data().asnumpy()))


def torch_tensors(torch):
    """`prepare` for a torch variant: every NDArray argument as a torch tensor."""
    def prepare(arguments):
        return tuple(torch.from_numpy(a.asnumpy()) if isinstance(a, mx.nd.NDArray) else a
                     for a in arguments)
    return prepare


def torch_call(torch, forward, parameters, train=False):
    """`run` for a torch program: inference under no_grad, or forward and
    backward of the output's sum (the parameters' gradients zeroed first)."""
    def run(*arguments):
        if not train:
            with torch.no_grad():
                return forward(*arguments)
        for param in parameters:
            param.grad = None
        out = forward(*arguments)
        out.sum().backward()
        return out
    return run


def torch_variants(torch, forward, parameters, train=False, rtol=1e-4, atol=1e-5):
    """PyTorch eager and torch.compile running `forward` (none without torch)."""
    if torch is None:
        return []
    return [Variant(name, torch_call(torch, run, parameters, train),
                    prepare=torch_tensors(torch), rtol=rtol, atol=atol)
            for name, run in (("pytorch eager", forward),
                              ("torch.compile", torch.compile(forward)))]


def command_line():
    """The command that runs this benchmark as it ran, from the repository's root."""
    script = os.path.relpath(os.path.abspath(sys.argv[0]), REPO)
    return shlex.join([".venv/bin/python", script] + sys.argv[1:])


def ratio(reference_ms, ms):
    """How many times faster than the reference, as printed in the tables."""
    return "%.2fx" % (reference_ms / ms)


def print_table(title, header: Sequence[str], rows: Sequence[Sequence[Any]]):
    """A markdown table under its title and the command that produced it; floats
    get 3 significant digits (at least one decimal)."""
    def cell(value):
        if isinstance(value, float):
            return "%.*f" % (max(1, 2 - int(np.floor(np.log10(abs(value))))) if value else 1,
                             value)
        return str(value)
    print("\n**%s** (`%s`)\n" % (title, command_line()))
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(cell(value) for value in row) + " |")
    sys.stdout.flush()
