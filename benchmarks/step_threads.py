"""Where a training step's time goes: the calling thread's CPU time against the step's.

A step of MXNet runs on two threads: the calling (Python) thread runs the script, its
Python and MXNet's C calls, which queue operators; MXNet's engine thread runs them.
The step ends when both have, so the slower one bounds it. For each workload of `make
report` (training_report.WORKLOADS) and variant (MXNet imperative, gluon_dyn's whole
step, and the models hybridized by hand with the fused update where by_hand.py has
them), this prints per step: its wall time; the calling thread's CPU time; of that, the
CPU time inside `backward()` and inside `Trainer.step`; and the wall time the calling
thread spent not computing (waiting for the engine, or descheduled). A step whose
calling thread computes most of its wall time is bound by that thread: faster operator
kernels do not shorten it while they run beside it.

Variants are checked to compute the imperative losses over the warm-up steps, then run
interleaved as `make report` runs them (training_report.interleaved: the fused trainers'
choice of cores made first); figures are medians over rounds.

    python benchmarks/step_threads.py --only lenet,gan
"""
import argparse
import contextlib
import statistics
import time

import mxnet as mx
from mxnet.gluon import trainer as gluon_trainer

import by_hand
import training_report
from training_report import REFERENCE, WHOLE_STEP, WORKLOADS, short_name
from training_twins import mxnet_steps

FUSED_BY_HAND = [title for title, fused in training_report.BY_HAND_VARIANTS if fused]
TIMED = ("backward()", "trainer.step")


class CallTimes:
    """The calling thread's CPU seconds spent inside NDArray.backward and Trainer.step
    while it is entered (the methods wrapped, then restored)."""

    def __init__(self):
        self.cpu = dict.fromkeys(TIMED, 0.0)
        self._methods = [(mx.nd.NDArray, "backward", "backward()"),
                         (gluon_trainer.Trainer, "step", "trainer.step")]
        self._stack = contextlib.ExitStack()

    def __enter__(self):
        for owner, name, title in self._methods:
            method = getattr(owner, name)
            setattr(owner, name, self._timed(method, title))
            self._stack.callback(setattr, owner, name, method)
        return self

    def __exit__(self, *failure):
        self._stack.close()

    def _timed(self, method, title):
        def timed(*args, **kwargs):
            start = time.thread_time()
            try:
                return method(*args, **kwargs)
            finally:
                self.cpu[title] += time.thread_time() - start
        return timed


def measured_run(steps, indices):
    """(wall, calling thread's CPU, {TIMED title: CPU}) seconds of `steps`
    (training_twins.mxnet_steps) over `indices`."""
    with CallTimes() as calls:
        _, _, wall = steps(indices)
    return wall, steps.thread_seconds, calls.cpu


def measure(label, script, flags, warmup, rounds, steps_per_run):
    """{variant: {figure: median ms per step}} of one workload."""
    trainings = training_report.mxnet_trainings(
        script, flags, variants=[(REFERENCE, []), (WHOLE_STEP, ["--whole-step"])],
        backend=training_report.TRAINING_BACKENDS.get(short_name(label)),
        by_hand_variants=[(title, True) for title in FUSED_BY_HAND]
        if by_hand.available(script) else ())
    variants = {title: mxnet_steps(training) for title, training in trainings.items()}
    training_report.prepared(variants, warmup, list(variants), {
        WHOLE_STEP: lambda: training_report.cores_measured(trainings[WHOLE_STEP])})
    runs = training_report.rotated_runs(variants, warmup, rounds, steps_per_run, measured_run)
    return {title: _figures(done, steps_per_run) for title, done in runs.items()}


def _figures(runs, steps):
    def median_ms(values):
        return statistics.median(values) / steps * 1e3
    figures = {"wall": median_ms([wall for wall, _, _ in runs]),
               "thread CPU": median_ms([cpu for _, cpu, _ in runs]),
               "not computing": median_ms([wall - cpu for wall, cpu, _ in runs])}
    for title in TIMED:
        figures["in " + title] = median_ms([calls[title] for _, _, calls in runs])
    return figures


def table(results):
    columns = ["wall", "thread CPU", "in backward()", "in trainer.step", "not computing"]
    lines = ["| workload | variant | %s (ms a step) |" % " | ".join(columns),
             "|---|---|" + "---|" * len(columns)]
    for label, variants in results.items():
        for title, figures in variants.items():
            lines.append("| %s | %s | %s |" % (label, title, " | ".join(
                "%.3f" % figures[column] for column in columns)))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="lenet,gan",
                        help="workloads by their script's name, comma-separated")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=10, help="steps of a timed run")
    args = parser.parse_args(argv)
    wanted = set(args.only.split(","))
    results = {}
    for label, script, flags, _, warmup, _ in WORKLOADS:
        if script.NAME in wanted or short_name(label).lower() in wanted:
            results[label] = measure(label, script, flags, warmup, args.rounds, args.steps)
    print(table(results))


if __name__ == "__main__":
    main()
