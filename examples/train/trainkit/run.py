"""The command line and loop every training script shares.

A script defines its models as plain Gluon Blocks and a `Training` (which
blocks and trainers it has, one step, the evaluation, one inference call);
`main` parses the
common flags, sets up the workers, resumes from a checkpoint, runs the steps
with a progress bar, checkpoints, evaluates, and draws the loss curve.
"""
import argparse
import os
import time

import mxnet as mx
import numpy as np

import gluon_dyn

from . import checkpoint, plot
from .progress import ProgressBar
from .workers import Workers


class Training:
    """What a script provides. `blocks` and `trainers` are dicts by name (saved in
    checkpoints); `carried()` / `carry(arrays)` get and set arrays kept from step
    to step (a dict of NDArrays); `step(index, rng)` trains on one global batch
    (this worker's share of it) and returns (sum of the per-sample losses, samples)
    of this worker; `evaluate()` returns the final metrics (a dict); `infer(rng)`
    makes one inference call on fresh inputs and returns (its output, the number
    of samples it served), for benchmarks."""
    blocks, trainers = {}, {}

    def carried(self):
        return {}

    def carry(self, arrays):
        if arrays:
            raise ValueError("the checkpoint holds arrays %s that this run does not carry"
                             % sorted(arrays))

    def step(self, index, rng):
        raise NotImplementedError

    def evaluate(self):
        raise NotImplementedError

    def infer(self, rng):
        raise NotImplementedError


def parse_args(script, argv):
    """The common flags, the script's own (its `add_arguments(parser)`), and its
    DEFAULTS for steps, batch size and learning rate."""
    name, defaults = script.NAME, script.DEFAULTS
    parser = argparse.ArgumentParser(prog=name, description=script.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dynamic", action="store_true",
                        help="run the models with hybridize(dynamic=True)")
    parser.add_argument("--whole-step", action="store_true",
                        help="--dynamic, and each trainer's update of all parameters as a few "
                             "fused MXNet calls (gluon_dyn.fused_updates)")
    parser.add_argument("--backend", choices=["mxnet", "tvm"], default="mxnet",
                        help="with --dynamic: run inference calls on TVM where faster")
    parser.add_argument("--steps", type=int, default=defaults["steps"])
    parser.add_argument("--batch-size", type=int, default=defaults["batch_size"],
                        help="global batch: each of N Horovod workers takes 1/N of it")
    parser.add_argument("--lr", type=float, default=defaults["lr"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint", help="directory for checkpoints")
    parser.add_argument("--checkpoint-every", type=int, default=100, help="steps")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the checkpoint in --checkpoint")
    parser.add_argument("--plot", help="loss-curve PNG (default: %s-loss.png)" % name)
    parser.add_argument("--quiet", action="store_true", help="no progress bar (the final line still prints)")
    getattr(script, "add_arguments", lambda parser: None)(parser)
    args = parser.parse_args(argv)
    if args.resume and not args.checkpoint:
        parser.error("--resume needs --checkpoint DIR")
    if args.steps < 0 or args.batch_size < 1 or args.checkpoint_every < 1:
        parser.error("--steps must be >= 0, --batch-size and --checkpoint-every >= 1")
    args.dynamic = args.dynamic or args.whole_step
    return args


def mode(args):
    """How the run trains, for titles: "", " (dynamic)" or " (whole step)"."""
    return " (whole step)" if args.whole_step else " (dynamic)" if args.dynamic else ""


def hybridize(block, args):
    """The script's models with --dynamic: hybridize(dynamic=True). With --whole-step
    the graphs serve every call they can (check_speed=False): the step runs as graphs,
    as asked, rather than as written wherever timings on a busy machine say Python
    was faster; and a step's recorded calls of a recursive model (one per tree) run
    as one batch (batch_calls=True)."""
    if args.dynamic:
        block.hybridize(dynamic=True, backend=args.backend,
                        check_speed=False if args.whole_step else None,
                        batch_calls=args.whole_step)


def setup(script, args):
    """The script's Training and its Workers, for these parsed flags."""
    workers = Workers(fused_updates=args.whole_step)
    return script.TRAINING(args, workers), workers


def updates_note(trainers):
    """How the updates of each trainer (a dict by name) ran, from
    gluon_dyn.training.report: "updates fused: discriminator 4, generator 4", those
    MXNet's loop ran counted with their reason, and where a step's graphs ran on
    every core, why ("all cores: measured: ...")."""
    notes = []
    for name, trainer in sorted(trainers.items()):
        report = gluon_dyn.training.report(trainer)
        notes.append("%s %d%s%s" % (name, report["fused_steps"], "".join(
            " (%d by MXNet's loop: %s)" % (count, why)
            for why, count in sorted(report["loop_steps"].items())), "".join(
            ", all cores (%s)" % choice["reason"] for choice in report["all_cores"]
            if choice["state"] == "all cores")))
    return "updates fused: " + ", ".join(notes)


def step_seed(args, index, rank):
    """Seeds that depend only on the step (and the worker): a resumed run draws
    what the uninterrupted run drew."""
    return (args.seed * 1000003 + index * 7919 + rank) % (2 ** 31)


def main(script, argv=None):
    """Runs a training script (a module with NAME, DEFAULTS, TRAINING, and
    optionally add_arguments); returns a dict: per-step losses (mean per sample
    over all workers), metrics, final parameters (numpy, by block), throughput
    (samples/s after warm-up, all workers), gluon_dyn's reports (dynamic runs: the
    blocks'; whole-step runs: the trainers' too)."""
    args = parse_args(script, argv)
    name = script.NAME
    training, workers = setup(script, args)
    first, losses = 0, []
    if args.resume:
        first, losses, arrays = checkpoint.load(args.checkpoint, training.blocks,
                                                training.trainers)
        training.carry(arrays)
    chief = workers.rank == 0
    bar = ProgressBar(name + mode(args), args.steps, first,
                      enabled=chief and not args.quiet)
    started = time.perf_counter()
    for index in range(first, args.steps):
        seed = step_seed(args, index, workers.rank)
        mx.random.seed(seed)
        loss_sum, samples = training.step(index, np.random.RandomState(seed))
        loss_sum, samples = workers.total(loss_sum, samples)
        losses.append(loss_sum / samples)
        bar.update(samples, losses[-1])
        if args.checkpoint and chief and ((index + 1) % args.checkpoint_every == 0
                                          or index + 1 == args.steps):
            checkpoint.save(args.checkpoint, index + 1, losses, training.blocks,
                            training.trainers, training.carried())
    bar.close()
    seconds, throughput = time.perf_counter() - started, bar.throughput()
    metrics = training.evaluate()
    result = {"losses": losses, "metrics": metrics, "throughput": throughput,
              "seconds": seconds,
              "params": {block_name: {key: p.data().asnumpy() for key, p in
                                      block._collect_params_with_prefix().items()}
                         for block_name, block in training.blocks.items()},
              "reports": {block_name: gluon_dyn.hybridize.report(block)
                          for block_name, block in training.blocks.items() if args.dynamic},
              "trainer_reports": {trainer_name: gluon_dyn.training.report(trainer)
                                  for trainer_name, trainer in training.trainers.items()
                                  if args.whole_step}}
    if chief:
        if losses:
            path = args.plot or "%s-loss.png" % name
            plot.loss_curve(path, losses, "%s%s, %d steps" % (name, mode(args), len(losses)))
            result["plot"] = os.path.abspath(path)
        print("%s: %s; %s samples/s%s%s" % (
            name, ", ".join("%s %.4g" % item for item in metrics.items()),
            "%.1f" % result["throughput"] if result["throughput"] else "-",
            "; " + updates_note(training.trainers) if args.whole_step else "",
            "; loss curve " + result["plot"] if "plot" in result else ""))
    workers.shutdown()
    return result
