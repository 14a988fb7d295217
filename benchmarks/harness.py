"""The benchmark rules, in one place, for every benchmark in this folder.

A benchmark describes its program as `Variant`s (the imperative reference first)
and a function `make_inputs(call)` giving the arguments of call number `call`:
new arrays at every call, the same values for the same call number, so every
variant of one call computes the same thing. Then:

- `compare` warms up every variant (calls interleaved, each output checked
  against the reference's output of the same call), then times `repeats` calls
  of each, interleaved (A, B, C, then B, C, A, then C, A, B, ...) on inputs all made before the
  first timed call, each timed call right after an untimed call of the same
  variant (SETTLING_CALLS), each variant's calls once the machine is idle (`settle`),
  and gives each variant's times (medians for the tables);
- `run_calls` does the same for a fixed sequence of calls whose every call
  matters (a guard that fails at call 9), checking every call;
- `print_table` prints a markdown table under the command line that produced it.

PyTorch variants (`torch_variants`) run in a worker process of their own
(`TorchProcess`, running a program of torch_twins.py), interleaved call by call
with the others and timed inside the worker (`Variant.self_timed`: the round trip
does not count): MXNet's OpenMP runtime and PyTorch's own each keep a team of
spinning threads, and in one process they slow each other (an LSTM training step
on 2 CPUs: MXNet 42 ms alone, 331 ms with PyTorch in the process; PyTorch 102 and
190 ms; with PyTorch in a worker, 47 and 110 ms). They run only when torch is
installed (`make setup`); benchmarks leave their rows out otherwise, and
this process never imports torch.

Each framework runs with the threads it gives itself, as its users get them: MXNet
1.9.1 gives an operator half the CPUs unless MXNET_OMP_MAX_THREADS (or
OMP_NUM_THREADS) is set before libmxnet loads, PyTorch a thread per physical core
(a worker gets that many unless the benchmark says otherwise). On the 2-vCPU
machine here MXNet's one thread is also its faster setting: with two, its engine
thread, their OpenMP team and the Python thread share two cores, and the GAN's
training step as written took 9.0 ms instead of 6.2 (docs/mxnet_behaviours.md).
"""
import contextlib
import dataclasses
import functools
import importlib.machinery
import multiprocessing
import os
import shlex
import statistics
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Sequence

import mxnet as mx
import numpy as np
from mxnet import autograd

import torch_worker
from gluon_dyn.hybridize import report
from gluon_dyn.measure import CONFIRMATIONS, MIN_SAMPLES, timed_ms
from gluon_dyn.threads import cores

BENCHMARKS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCHMARKS)


# Untimed calls of a variant right before each of its timed calls, on inputs of
# their own: a timed call then starts from what its own variant leaves, not from
# what the variant before it left running. After MXNet's last parallel region its
# OpenMP threads spin for about 2 ms before they sleep (GNU OpenMP's default), on
# a 2-core machine one core of two: the corpus's Tree-LSTM, whose calls run mostly
# on one thread (gluon_dyn/threads.py), measured 2.2 ms a call right after
# imperative calls (whose operators run on both cores) and 1.7 ms after its own,
# or after them with OMP_WAIT_POLICY=passive (perf: the spinning thread took 37% of
# the process's samples); its ratio to imperative ranged 3.6x-4.0x timed right after
# the other variant and 4.2x-4.5x after a call of its own.
SETTLING_CALLS = 1

# A PyTorch step leaves its OpenMP team spinning for about 8 ms after the worker
# replied (measured: the worker used 8-9 ms of CPU in the 8 ms after each GAN step,
# with a thread per core), across the settling call and into the timed call of the
# MXNet variant next in the rotation; MXNet as written trained 10% faster beside a
# one-thread PyTorch, whose team does not spin. So each variant's run of calls starts
# once the threads of this process and of the PyTorch workers are idle (`settle`), at
# most IDLE_WAIT_S for each process; its own calls follow each other at once, as in
# a user's loop.
IDLE_WAIT_S = 0.05

# Calls before timing starts: hybridize(dynamic=True) profiles 3 calls, traces on
# the 4th, then its speed check alternates graph and Python until each has
# MIN_SAMPLES timings, CONFIRMATIONS times over, before the graph serves every call.
WARMUP = 4 + 2 * MIN_SAMPLES * CONFIRMATIONS
MAX_REPEATS_FACTOR = 10   # compare's timed calls with a budget: at most this times `repeats`


def _same(arguments):
    return arguments


@dataclasses.dataclass
class Variant:
    """One way to run the benchmarked program.

    `run(*arguments)` computes one call and returns its output(s) (MXNet work it
    queued is waited for inside the timed region); a `self_timed` one returns
    (output(s), milliseconds) measured where it ran (a PyTorch worker).
    `prepare(arguments)` turns the arguments `make_inputs` gave into this
    variant's own (a PyTorch variant sends them to its worker), before any
    timing. Outputs must match the reference's to rtol/atol."""
    name: str
    run: Callable
    prepare: Callable = _same
    rtol: float = 1e-4
    atol: float = 1e-5
    self_timed: bool = False


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
    """An output (NDArray, numpy array, or a list/tuple of them) as a list of numpy
    arrays."""
    if isinstance(output, (list, tuple)):
        return [array for item in output for array in as_numpy(item)]
    if hasattr(output, "asnumpy"):
        return [output.asnumpy()]
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


def timed_call(variant, arguments):
    """(output, milliseconds) of one call of `variant` on its prepared `arguments`:
    timed here, or where it ran if it is self-timed."""
    if variant.self_timed:
        return variant.run(*arguments)
    return timed_ms(lambda: variant.run(*arguments))


def rotated(variants, call):
    """`variants` in the order timed round `call` runs them: one later each call, so
    that no variant always follows the same one (in noisy_neighbour.py the variant
    called right after the imperative one measured up to 4x slower than it did placed
    elsewhere)."""
    start = call % len(variants)
    return list(variants[start:]) + list(variants[:start])


def _round(variants, arguments, call, check):
    """One call of every variant in turn; milliseconds of each, in `variants`' order.
    A checked round starts with variants[0], the reference; unchecked rounds are
    `rotated`."""
    ms, expected = {}, None
    for variant in (variants if check else rotated(variants, call)):
        settle()
        output, ms[variant.name] = timed_call(variant, arguments[variant.name])
        if check and expected is None:
            expected = as_numpy(output)
        elif check:
            check_output(variant, output, expected, call, variants[0].name)
    return [ms[variant.name] for variant in variants]


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
            warmup: int = WARMUP, budget_ms: float = 0.0) -> Dict[str, Timing]:
    """`warmup` checked calls then `repeats` timed calls of every variant, interleaved;
    with `budget_ms`, more timed calls where they fit in it (timed_repeats).

    Warm-up calls are numbered 0..warmup-1 and their inputs are made one round at
    a time; the timed rounds' calls (numbered on from there: per round, a run of
    SETTLING_CALLS + 1 calls of each variant, the last one timed) get inputs all
    made before the first of them and kept alive to the end, so no array is ever
    passed twice.
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
    rounds, run = timed_repeats(repeats, budget_ms, warmup_ms), SETTLING_CALLS + 1
    made = _made(variants, make_inputs, range(call, call + rounds * run))
    timed = {v.name: [] for v in variants}
    for index in range(rounds):
        for variant in rotated(variants, call + index):
            settle()
            for number in range(index * run, (index + 1) * run):
                _, ms = timed_call(variant, made[variant.name][number])
            timed[variant.name].append(ms)      # the last of its run
    return {v.name: Timing(warmup_ms[v.name], timed[v.name]) for v in variants}


def timed_repeats(repeats, budget_ms, warmup_ms):
    """How many timed calls compare makes: `repeats`, or as many rounds as fit in
    `budget_ms` at the round time of the later half of the warm-up calls (each
    variant's median, times its run of calls), up to MAX_REPEATS_FACTOR times
    `repeats`. The median of ten calls of a few milliseconds moves with every call
    that meets a new input shape or a noisy moment: the corpus's Tree-LSTM ratio
    ranged 2.8x to 6.2x over runs."""
    if not budget_ms:
        return repeats
    round_ms = (SETTLING_CALLS + 1) * sum(
        statistics.median(ms[len(ms) // 2:]) for ms in warmup_ms.values())
    fitting = int(budget_ms / round_ms) if round_ms > 0 else repeats
    return max(repeats, min(fitting, MAX_REPEATS_FACTOR * repeats))


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


@functools.lru_cache(maxsize=None)
def torch_installed():
    """Whether the PyTorch worker finds PyTorch (said once when it does not): on its path,
    torch_worker.TORCH_PACKAGES comes first, where `make setup` installs it. This
    process never imports it: its variants run in a TorchProcess."""
    if importlib.machinery.PathFinder.find_spec(
            "torch", [torch_worker.TORCH_PACKAGES] + sys.path) is None:
        print("PyTorch is not installed: its rows are left out (`make setup` installs it)")
        return False
    return True


class WorkerError(RuntimeError):
    """The PyTorch worker failed (its traceback is the message) or ended."""


def layer_values(layer):
    """A Gluon layer's weight and its bias, if it has one, as numpy arrays: a layer
    argument of torch_twins' builders."""
    params = (layer.weight, getattr(layer, "bias", None))
    return tuple(param.data().asnumpy() for param in params if param is not None)


def numpy_arguments(arguments):
    """The default `encode` of a TorchProcess: NDArray arguments as numpy arrays."""
    return tuple(a.asnumpy() if isinstance(a, mx.nd.NDArray) else a for a in arguments)


@contextlib.contextmanager
def _main_script_hidden():
    """Hides the main script from a process spawned meanwhile: spawn runs it again in
    the child (a pickled target may be defined there) unless __main__ names none, as
    under `python -c`. The benchmark scripts load MXNet (and TVM), which the PyTorch
    worker must not; its code is in torch_worker.py and torch_twins.py."""
    main = sys.modules["__main__"]
    saved = {name: main.__dict__[name] for name in ("__file__", "__spec__")
             if name in main.__dict__}
    main.__dict__.pop("__file__", None)
    main.__spec__ = None
    try:
        yield
    finally:
        main.__dict__.update(saved)


def _running_threads(pid, skip):
    """The threads of process `pid` on a CPU or waiting for one (state R), or in an
    uninterruptible wait they will run on from (D: a page fault, a disk read), but
    those in `skip`; empty where /proc cannot say (the process ended, not Linux)."""
    running = []
    try:
        threads = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return running
    for tid in threads:
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as stat:
                state = stat.read().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            continue    # the thread ended meanwhile
        if state in ("R", "D") and int(tid) not in skip:
            running.append(int(tid))
    return running


def wait_for_idle(pid, skip=(), timeout=IDLE_WAIT_S):
    """Returns once no thread of process `pid` (but those in `skip`) runs, or after
    `timeout` seconds: spinning OpenMP threads sleep in a few milliseconds."""
    deadline = time.monotonic() + timeout
    while _running_threads(pid, skip) and time.monotonic() < deadline:
        time.sleep(0.0005)


def settle(timeout=IDLE_WAIT_S):
    """Waits for the threads of this process (but the calling one) and of the live
    PyTorch workers to be idle (at most `timeout` seconds for each process): the next
    variant's calls start on a quiet machine."""
    wait_for_idle(os.getpid(), skip=(threading.get_native_id(),), timeout=timeout)
    for pid in list(TorchProcess.live_workers):
        wait_for_idle(pid, timeout=timeout)


class TorchProcess:
    """A PyTorch program (torch_twins' `builder`, or "module.builder" of another module
    here, with `arguments`: numpy arrays, ints, strings, containers of them) in a worker
    process of its own (torch_worker.py says the protocol), with `threads` threads
    (default: one per physical core), in training mode (`train`: forward and backward of
    the output's sum), as whole training steps its builder wrote (`step`) or inference.
    `encode(arguments)` turns a call's arguments into what the worker receives
    (picklable; the builder's `prepare` reads it). Close it when done (a context
    manager); a daemon, it ends with this process anyway."""
    live_workers = set()     # their pids, for `settle`

    def __init__(self, builder, *arguments, train=False, step=False, threads=None,
                 encode=numpy_arguments):
        if train and step:
            raise ValueError("a PyTorch program runs as a forward trained by the worker "
                             "(train) or as a whole training step (step), not both")
        context = multiprocessing.get_context("spawn")
        self._connection, worker_end = context.Pipe()
        self.encode = encode
        mode = "step" if step else "train" if train else "inference"
        self.process = context.Process(
            target=torch_worker.serve, name="pytorch " + builder, daemon=True,
            args=(worker_end, builder, arguments, mode, threads or cores()))
        with _main_script_hidden():
            self.process.start()
        TorchProcess.live_workers.add(self.process.pid)
        worker_end.close()   # so that the worker's end alone keeps it open: recv sees it end
        self._reply()        # built

    def _reply(self):
        try:
            status, value = self._connection.recv()
        except EOFError:
            self.close()
            raise WorkerError("the PyTorch worker %s ended (exit code %s)"
                              % (self.process.name, self.process.exitcode)) from None
        if status == "error":
            self.close()
            raise WorkerError("the PyTorch worker %s failed:\n%s" % (self.process.name, value))
        return value

    def prepare(self, arguments):
        """`Variant.prepare`: sends one call's arguments; (their token,)."""
        self._connection.send(("prepare", self.encode(arguments)))
        return (self._reply(),)

    def run(self, variant, token):
        """One call of `variant` ("pytorch eager" or "torch.compile") on the arguments
        sent under `token`: (outputs as numpy arrays, milliseconds in the worker)."""
        self._connection.send(("run", variant, token))
        return self._reply()

    def run_each(self, variant, each):
        """Calls of `variant` one after the other, on the arguments in `each`, each
        prepared in the worker right before its call: ([outputs of each call],
        milliseconds of the calls in the worker)."""
        self._connection.send(("run_each", variant, [self.encode(a) for a in each]))
        return self._reply()

    def compiler_report(self):
        """What torch.compile did in the worker so far (torch_worker.compiler_report)."""
        self._connection.send(("compiler_report",))
        return self._reply()

    def variants(self, names=("pytorch eager", "torch.compile"), rtol=1e-4, atol=1e-5):
        """`Variant`s running this program ("torch.compile": torch.compile(forward))."""
        return [Variant(name, functools.partial(self.run, name), prepare=self.prepare,
                        rtol=rtol, atol=atol, self_timed=True) for name in names]

    def close(self):
        """Ends the worker and waits for it (killed after 30 s); again, does nothing."""
        TorchProcess.live_workers.discard(self.process.pid)
        if self.process.is_alive():
            try:
                self._connection.send(("close",))
            except OSError:   # it is ending already
                pass
            self.process.join(timeout=30)
            if self.process.is_alive():
                self.process.kill()
                self.process.join()
        self._connection.close()

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        self.close()


def torch_variants(workers, builder, *arguments, names=("pytorch eager", "torch.compile"),
                   rtol=1e-4, atol=1e-5, **options):
    """PyTorch variants running torch_twins' `builder` with `arguments` in a TorchProcess
    (`options`: its own) that `workers`, a contextlib.ExitStack, closes; none without
    PyTorch."""
    if not torch_installed():
        return []
    process = workers.enter_context(TorchProcess(builder, *arguments, **options))
    return process.variants(names, rtol, atol)


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
