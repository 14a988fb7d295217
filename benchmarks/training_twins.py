"""The training scripts of examples/train beside their PyTorch versions
(torch_training.py, in a PyTorch worker), from MXNet's side: what a script's Training
gives its twin, the steps of either as a variant of one workload, and the check that a
twin trains as the script does.

The check (`check_twins`) trains the script as written (imperative MXNet) and each
PyTorch variant from the same parameter values on the same batches for CHECK_STEPS
steps and compares the per-sample losses of every step: the largest difference over
the largest loss must stay within RTOL. MXNet and PyTorch draw different dropout
masks, so the check runs both without dropout (the models' `dropout` attribute set to
0); the timed runs keep it.

Why 4 steps and 1e-4: float32 kernels that sum in another order (oneDNN's against
PyTorch's) differ by about 1e-7 relative (the LM's first gradients agree to 4e-7), and
Adam's first steps normalise every gradient element, which turns the rounding of
elements whose gradient is near epsilon into weight differences; then training drifts
the trajectories apart, fastest where it is unstable (the LM's loss spikes at its 5th
step: 2e-6 after 4 steps, 2e-4 after 5). Over 4 steps of the report's settings the
right twins differed by at most 2e-5 (REINFORCE), while a learning rate 5% off
differed by 5e-4 (LeNet) to 0.1 (REINFORCE); 1% off, by 6e-5 (LeNet: under the
tolerance) to 0.02.
"""
import dataclasses
import os
import sys
import time

import mxnet as mx
import numpy as np

import harness
import torch_twins

TRAIN_DIR = os.path.join(harness.REPO, "examples", "train")
if TRAIN_DIR not in sys.path:
    sys.path.insert(0, TRAIN_DIR)

from trainkit.run import parse_args, setup, step_seed  # noqa: E402

CHECK_STEPS = 4
RTOL = 1e-4
TORCH_VARIANTS = ("pytorch eager", "torch.compile")


class TwinMismatch(AssertionError):
    """A PyTorch twin trains to other losses than the script: its times mean nothing."""


@dataclasses.dataclass
class TwinCheck:
    """How a PyTorch variant fared in check_twins: the relative difference of its loss
    trajectory from the script's, or why it could not run; what torch.compile did in
    its process (torch_worker.compiler_report)."""
    difference: float = None
    failure: str = None
    compiled: dict = None


def build(script, flags):
    """The script's Training with these command-line flags, in this process."""
    return setup(script, parse_args(script, ["--quiet"] + flags))[0]


def initialized(training):
    """`training` once every parameter has its value: one inference call finishes the
    deferred initialisation (LeNet's and the policy's layers learn their input sizes
    there); what it carries from call to call (the LM's state) is put back."""
    carried = training.carried()
    training.infer(np.random.RandomState(0))
    training.carry(carried)
    mx.nd.waitall()
    return training


def parameter_values(training):
    """{block name: {structural parameter name: numpy array}} of an initialised Training."""
    return {name: {key: param.data().asnumpy()
                   for key, param in block._collect_params_with_prefix().items()}  # pylint: disable=protected-access
            for name, block in training.blocks.items()}


def share_values(source, target):
    """Gives `target` (a Training of the same script, not run yet) the parameter values
    of `source` (initialised), in arrays of its own; parameters awaiting deferred
    initialisation take them when they initialise."""
    values = parameter_values(source)
    for name, block in target.blocks.items():
        for key, param in block._collect_params_with_prefix().items():  # pylint: disable=protected-access
            param.set_data(mx.nd.array(values[name][key]))


def without_dropout(training):
    """`training` with every model's dropout rate 0 (the check's runs)."""
    for block in training.blocks.values():
        if hasattr(block, "dropout"):
            block.dropout = 0.0
    return training


def optimizer_settings(trainer):
    """The update rule of a gluon.Trainer and its hyper-parameters, for the twin's
    optimizer (torch_training.OPTIMIZERS): kind (MXNet's optimizer name), lr, wd,
    clip_gradient and the rule's own (Adam's beta1, beta2, epsilon; AdaGrad's
    float_stable_eps). The batch's rescaling (1 / batch) is the twin's mean loss."""
    optimizer = trainer._optimizer  # pylint: disable=protected-access
    if optimizer.lr_scheduler is not None or any(
            p.lr_mult != 1 or p.wd_mult != 1 for p in trainer._params):  # pylint: disable=protected-access
        raise ValueError("the PyTorch twins have no learning-rate schedule nor per-parameter "
                         "lr_mult / wd_mult")
    settings = {"kind": type(optimizer).__name__.lower(), "lr": optimizer.learning_rate,
                "wd": optimizer.wd, "clip_gradient": optimizer.clip_gradient}
    for name in ("beta1", "beta2", "epsilon", "float_stable_eps"):
        if hasattr(optimizer, name):
            settings[name] = getattr(optimizer, name)
    return settings


def plain_tree(tree):
    """A tree of tree_sentiment.py as a torch_twins.Tree (picklable without MXNet)."""
    if tree.word is not None:
        return torch_twins.Tree(tree.word.asnumpy(), [])
    return torch_twins.Tree(None, [plain_tree(tree.left), plain_tree(tree.right)])


# Where each script's Training keeps the data its twin trains on (torch_training's
# builders say what they read).
TWIN_DATA = {
    "lenet": lambda training: {"x": training.train_x, "y": training.train_y},
    "lstm_lm": lambda training: {"streams": training.streams, "batches": training.batches},
    "tree_sentiment": lambda training: {"trees": [plain_tree(t) for t in training.train_trees],
                                        "labels": training.train_labels},
    "cartpole": lambda training: {},
    "gan": lambda training: {"real": training.real},
}


def describe(script, training):
    """What torch_training's builder of `script` takes from its initialised, untrained
    `training` (torch_training's docstring lists it)."""
    return {"values": parameter_values(training), "args": vars(training.args),
            "optimizers": {name: optimizer_settings(trainer)
                           for name, trainer in training.trainers.items()},
            "dropout": {name: block.dropout for name, block in training.blocks.items()
                        if hasattr(block, "dropout")},
            "data": TWIN_DATA[script.NAME](training)}


def torch_process(script, twin, variants):
    """A harness.TorchProcess training the twin of `script` described by `twin` (what
    `describe` gave) as `variants` (names of TORCH_VARIANTS)."""
    return harness.TorchProcess("torch_training.build_" + script.NAME, tuple(variants), twin,
                                step=True)


def mxnet_steps(training, run=None):
    """A variant in this process: `indices` -> (values, samples, seconds) of
    `run(training, index, rng)` for each index in turn (default: a training step, its
    value the sum of the per-sample losses), timed from an idle engine until MXNet
    finished the last, as a loop's steps run: each step's queued work overlaps the
    Python of the next. Seeded before the timing starts, as trainkit's loop seeds
    step `index`: each step's NumPy RandomState (180 us each), MXNet's generator for
    the first step only. trainkit's loop seeds MXNet's at every step, so that a
    resumed run draws what the uninterrupted one drew; that seeding runs on MXNet's
    engine (its 1024 parallel generators: 1.3 ms a call here), a cost
    of the scripts' exact resumption, not of a way to run them. After a call,
    `call.thread_seconds` is the calling thread's CPU time over the timed interval."""
    run = run or (lambda training, index, rng: training.step(index, rng))

    def call(indices):
        seeds = [step_seed(training.args, index, 0) for index in indices]
        rngs = [np.random.RandomState(seed) for seed in seeds]
        values, samples = [], 0
        mx.random.seed(seeds[0])
        mx.nd.waitall()
        start, thread_start = time.perf_counter(), time.thread_time()
        for index, rng in zip(indices, rngs):
            value, count = run(training, index, rng)
            values.append(value)
            samples += count
        mx.nd.waitall()
        call.thread_seconds = time.thread_time() - thread_start
        return values, samples, time.perf_counter() - start
    return call


def torch_steps(process, variant, args):
    """A PyTorch variant: `indices` -> (sums of the per-sample losses, samples, seconds
    in the worker) of those steps of `variant` in `process`, one after the other, each
    seeded as the script's right before it (its seeding not timed)."""
    def call(indices):
        outputs, ms = process.run_each(variant, [(index, step_seed(args, index, 0))
                                                 for index in indices])
        return ([float(loss) for loss, _ in outputs], sum(int(samples) for _, samples in outputs),
                ms / 1000)
    return call


def per_sample_losses(steps_of, steps):
    """The per-sample loss of each of the first `steps` steps of a variant."""
    losses = []
    for index in range(steps):
        (loss,), samples, _ = steps_of([index])
        losses.append(loss / samples)
    return np.array(losses)


def check_twins(script, flags, variants=TORCH_VARIANTS, steps=CHECK_STEPS):
    """Trains `script` (with `flags`) as written and as each PyTorch variant from the
    same values on the same batches, without dropout, for `steps` steps: {variant:
    TwinCheck}. Raises TwinMismatch when a variant that ran differs by more than RTOL
    (the largest difference of a step's per-sample loss over the largest such loss)."""
    reference = without_dropout(initialized(build(script, flags)))
    twin = describe(script, reference)
    expected = per_sample_losses(mxnet_steps(reference), steps)
    results = {}
    for variant in variants:
        try:
            with torch_process(script, twin, (variant,)) as process:
                losses = per_sample_losses(torch_steps(process, variant, reference.args), steps)
                compiled = process.compiler_report()
        except harness.WorkerError as error:
            results[variant] = TwinCheck(failure=str(error).strip().splitlines()[-1])
            continue
        difference = float(np.max(np.abs(losses - expected)) / np.max(np.abs(expected)))
        if not difference <= RTOL:
            raise TwinMismatch(
                "%s %s: %r trains to other losses than MXNet (relative difference %.3g > %g):"
                "\nMXNet   %s\nPyTorch %s" % (script.NAME, " ".join(flags), variant, difference,
                                             RTOL, expected, losses))
        results[variant] = TwinCheck(difference, compiled=compiled)
    return results


def compile_note(report):
    """What torch.compile did (torch_worker.compiler_report), in a sentence."""
    note = "%d graphs" % report["graphs"]
    if report["graph_breaks"]:
        note += ", graph breaks: " + "; ".join("%s (%d)" % item
                                               for item in report["graph_breaks"].items())
    if report["recompile_limit"]:
        note += (", a graph per input structure until Dynamo's recompile limit (%d), "
                 "then eager" % report["recompile_limit"])
    return note

