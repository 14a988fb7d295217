"""`make report`: the JANUS workloads (the seeds' Table 3.4) on this machine.

Each training script of examples/train runs as written (MXNet imperative), with
hybridize(dynamic=True) (gluon_dyn's graphs per call), with --whole-step (those graphs
and every trainer's update as a few fused MXNet calls), and as its PyTorch version
(benchmarks/torch_training.py: eager, and with torch.compile) in a worker process of
its own, and, where its models can be rewritten as HybridBlocks, hybridized by hand
(benchmarks/by_hand.py: what MXNet offers instead), all from the same parameter values
on the same batches. First the PyTorch
versions are checked to train to the script's losses (training_twins.check_twins:
4 steps, 1e-4 relative, without dropout, whose masks differ between frameworks; a
failure stops the report); then the variants' steps run interleaved (each round starts
one variant later; each variant's timed run of RUN_STEPS steps follows an untimed step
of its own), the MXNet ones checked to compute the imperative losses over the warm-up
steps; throughput is the median over runs of samples per second, an MXNet run timed
until MXNet finished its last step, a PyTorch one inside its worker. Inference compares
imperative, dynamic and dynamic with backend="tvm" on fresh inputs (outputs checked
against the imperative ones). The Horovod scale factor runs a script with 1 and with 2
workers on 127.0.0.1 (each worker keeps its batch: JANUS's weak scaling). Writes
docs/benchmarks.md and PNG plots beside it.
"""
import argparse
import contextlib
import os
import platform
import re
import statistics
import sys
import tempfile

import numpy as np

import gluon_dyn
from gluon_dyn.measure import FIRST_RECHECK

import by_hand
import harness
import training_twins
from training_twins import TRAIN_DIR, build, initialized, mxnet_steps, share_values

import cartpole  # noqa: E402  (examples/train is on the path: training_twins)
import gan  # noqa: E402
import lenet  # noqa: E402
import lstm_lm  # noqa: E402
import tree_sentiment  # noqa: E402
from trainkit import local_workers  # noqa: E402
from trainkit.run import updates_note  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# label, script, extra flags, JANUS's speed-up over imperative (Table 3.4),
# warm-up steps, timed runs of RUN_STEPS steps per variant
WORKLOADS = [
    ("LeNet (digits 8x8, batch 50)", lenet, [], 3.25, 20, 40),
    ("LSTM LM (stdlib text, batch 20)", lstm_lm, [], 8.03, 8, 20),
    # Tree models: 12 warm-up steps, in which the whole step's first steps run their
    # calls one by one (profiled), then as batches (batch_calls=True) profiled too, and
    # the recursion engine builds the programs of the schedules that recur; 5 timed
    # runs, as each step's 25 trees take from 15 to 30 ms whole.
    ("TreeRNN (generated trees, batch 25)", tree_sentiment, ["--cell", "rnn"], 47.6, 12, 5),
    ("TreeLSTM (generated trees, batch 25)", tree_sentiment, ["--cell", "lstm"], 18.4, 12, 5),
    ("REINFORCE (CartPole, 20 envs, decisions on TVM)", cartpole, [], 5.13, 4, 20),
    ("GAN (digits 8x8, batch 128)", gan, [], 2.61, 20, 40),
]
SCALING = [("LeNet", lenet, 50, 60), ("LSTM LM", lstm_lm, 20, 30)]   # per-worker batch, steps
# gluon_dyn's backend in a workload's training variants where it is not MXNet's: a
# REINFORCE step is mostly decisions, small inference calls each read at once, which TVM
# runs in the calling thread without MXNet's engine round trip (docs/mxnet_behaviours.md).
TRAINING_BACKENDS = {"REINFORCE": "tvm"}

# The MXNet variants of a training step: column title and the scripts' flags that make
# it; the first is the reference. The table, plots and checks take their columns from
# this list and from the PyTorch variants that ran. Inference runs the first two: the
# whole step changes only how trainers update.
MXNET_VARIANTS = [("MXNet imperative", []), ("gluon_dyn per-call graphs", ["--dynamic"]),
                  ("gluon_dyn whole step", ["--whole-step"])]
REFERENCE = MXNET_VARIANTS[0][0]
DYNAMIC = MXNET_VARIANTS[1][0]
WHOLE_STEP = MXNET_VARIANTS[2][0]
# What MXNet offers instead, where a script's models can be hybridized by hand
# (by_hand.py): column title and whether its trainers update as the whole step's do.
BY_HAND_VARIANTS = [("MXNet hybridized by hand", False),
                    ("hybridized by hand, fused update", True)]
TORCH_TITLES = {"pytorch eager": "PyTorch eager", "torch.compile": "torch.compile"}
SETTLING_STEPS = 120
# Steps in a timed run: a loop's steps overlap (MXNet queues a step's backward and
# update and runs them while Python makes the next step), so a run of steps, timed
# until MXNet finished the last, measures what a training loop gets; one step timed
# from an idle engine to its end measured its latency instead.
RUN_STEPS = 4


def short_name(label):
    """A workload's name without its data and batch: "LeNet", "LSTM LM", ..."""
    return label.split(" (")[0]


def option_name(name):
    """A workload's name as --only takes it: "lenet", "lstmlm", "treernn", ..."""
    return name.lower().replace(" ", "").replace("_", "")


def what_it_ran(training):
    """What gluon_dyn did with the blocks, from its reports; with the whole step,
    how many updates of each trainer ran fused."""
    notes = [updates_note(training.trainers)] if training.args.whole_step else []
    for name, block in training.blocks.items():
        report = gluon_dyn.hybridize.report(block)
        if report["fallback"]:
            notes.append("%s runs as Python (the imperative code: a difference is noise): %s"
                         % (name, report["fallback"].split(";")[0]))
        elif report["calls"]["by_kind"]["recursion"]:
            by_kind = report["calls"]["by_kind"]
            notes.append("%s: recursion engine, %d of %d calls%s" % (
                name, by_kind["recursion"] + by_kind["batched"], report["calls"]["total"],
                " (%d in batches of a step's calls: %s calls in the latest, losses included)" % (
                    by_kind["batched"], report["batched_calls"]["batch_sizes"][-1])
                if by_kind["batched"] else ""))
        else:
            calls = report["calls"]
            plans = report["tvm"]["plans"] if report["tvm"] else []
            notes.append("%s: graphs: %d, %d of %d calls on them%s%s%s" % (
                name, report["cached_graphs"], calls["graph"], calls["total"],
                " (%d in one graph with the other calls of their step, losses included)"
                % calls["by_kind"]["batched"] if calls["by_kind"]["batched"] else "",
                " (speed check: %s)" % report["speed_check"]["state"]
                if report["speed_check"]["state"] != "off" else "",
                ", %d runs of TVM plans" % sum(plan["calls"]["plan"] for plan in plans if plan)
                if plans else ""))
    return "; ".join(notes)


def interleaved(variants, warmup, rounds, checked, measuring=None):
    """Median samples/s of each variant, a function indices -> (values, samples,
    seconds) of steps run one after the other. Warm-up steps 0..warmup-1, one at a
    time, also check that the variants named in `checked` compute what checked[0]
    does; then each variant named in `measuring` ({name: a function, called once,
    that may start a measurement afresh and returns a function saying whether it
    still measures}) takes steps of its own until it has chosen (at most
    SETTLING_STEPS; choices that time the loop's own steps, here not interleaved
    with the other variants': the fused trainers' choice of cores, wide_steps.py,
    and the speed checks' first measurements). Then `rounds` rounds in rotated order
    (harness.rotated): each variant, once the machine is idle (harness.settle), takes
    untimed steps of its own (harness.SETTLING_CALLS), then a timed run of RUN_STEPS
    steps, as a training loop runs them."""
    prepared(variants, warmup, checked, measuring)
    runs = rotated_runs(variants, warmup, rounds, RUN_STEPS)
    return {name: statistics.median(samples / seconds for _, samples, seconds in done)
            for name, done in runs.items()}


def prepared(variants, warmup, checked, measuring=None):
    """The warm-up, checked, and the settling of the variants in `measuring`, of
    `interleaved`."""
    checked_warmup(variants, warmup, checked)
    for name, measure in (measuring or {}).items():
        harness.settle()
        still_measuring = measure()
        for index in range(warmup, warmup + SETTLING_STEPS):
            if not still_measuring():
                break
            variants[name]([index])


def rotated_runs(variants, warmup, rounds, steps, measured=lambda run, indices: run(indices)):
    """{name: [measured(the variant, a timed run's step indices) for each round]}: the
    rounds of `interleaved`, of timed runs of `steps` steps."""
    runs, per_round = {name: [] for name in variants}, harness.SETTLING_CALLS + steps
    for k in range(rounds):
        start = warmup + k * per_round
        for name in harness.rotated(list(variants), k):
            harness.settle()
            variants[name](range(start, start + harness.SETTLING_CALLS))
            runs[name].append(measured(variants[name], range(start + harness.SETTLING_CALLS,
                                                             start + per_round)))
    return runs


def checked_warmup(variants, warmup, checked):
    """Steps 0..warmup-1 of every variant, one step at a time; the variants named in
    `checked` must compute what checked[0] does."""
    for index in range(warmup):
        values = {name: steps([index])[0][0] for name, steps in variants.items()}
        for name in checked[1:]:
            np.testing.assert_allclose(values[name], values[checked[0]], rtol=1e-3, atol=1e-4,
                                       err_msg="%s disagrees with %s" % (name, checked[0]))


def cores_measured(training):
    """The fused trainers of `training` measure their choice of cores afresh; returns
    a function saying whether one still measures."""
    trainers = list(training.trainers.values())
    for trainer in trainers:
        gluon_dyn.training.measure_cores(trainer)
    return lambda: any(choice["state"] == "measuring" for trainer in trainers
                       for choice in gluon_dyn.training.report(trainer)["all_cores"])


def speed_checks_settling(training):
    """A function saying whether a block of `training` still has its speed check's
    first measurements ahead: measuring now, or its first scheduled re-check
    (measure.FIRST_RECHECK calls) not yet made. A re-check measures the forward as
    written against the graph, call by call, over a few steps: once early in a run,
    then after 10 times as many calls; timed runs measure what follows."""
    def settling():
        for block in training.blocks.values():
            check = gluon_dyn.hybridize.report(block)["speed_check"]
            if check["state"] != "off" and (check["state"].startswith("measuring")
                                            or check["calls"] <= FIRST_RECHECK):
                return True
        return False
    return settling


def infer_call(training, index, rng):
    from mxnet import autograd
    with autograd.predict_mode():
        output, samples = training.infer(rng)
    return output.asnumpy(), samples


def mxnet_trainings(script, flags, variants=MXNET_VARIANTS, backend=None, by_hand_variants=()):
    """{title: Training} of `variants` (MXNET_VARIANTS or its first ones), then of
    `by_hand_variants` (BY_HAND_VARIANTS or none), all from the reference's initial
    values; gluon_dyn's on `backend`, if given."""
    reference = initialized(build(script, flags))
    trainings = {REFERENCE: reference}
    for title, extra in variants[1:]:
        trainings[title] = build(script, flags + extra + (["--backend", backend] if backend
                                                          else []))
    for title, fused_update in by_hand_variants:
        trainings[title] = by_hand.build(script, flags, fused_update)
    for title, training in trainings.items():
        if training is not reference:
            share_values(reference, training)
    return trainings


def measure_training(label, script, flags, warmup, rounds):
    """(samples/s by variant, what gluon_dyn ran, the PyTorch check's results, what
    torch.compile did) of one workload."""
    checks = training_twins.check_twins(script, flags) if harness.torch_installed() else {}
    trainings = mxnet_trainings(script, flags, backend=TRAINING_BACKENDS.get(short_name(label)),
                                by_hand_variants=BY_HAND_VARIANTS if by_hand.available(script)
                                else ())
    variants = {title: mxnet_steps(training) for title, training in trainings.items()}
    twin = training_twins.describe(script, trainings[REFERENCE])
    compiled = None
    with contextlib.ExitStack() as workers:
        processes = {}
        for name, check in checks.items():
            if check.failure is None:
                processes[name] = workers.enter_context(
                    training_twins.torch_process(script, twin, (name,)))
                variants[TORCH_TITLES[name]] = training_twins.torch_steps(
                    processes[name], name, trainings[REFERENCE].args)
        rates = interleaved(variants, warmup, rounds, list(trainings),
                            {DYNAMIC: lambda: speed_checks_settling(trainings[DYNAMIC]),
                             WHOLE_STEP: lambda: cores_measured(trainings[WHOLE_STEP])})
        if "torch.compile" in processes:
            compiled = training_twins.compile_note(processes["torch.compile"].compiler_report())
    print("training  %-38s %s" % (label, "  ".join(
        "%s %.1f" % (title, rate) for title, rate in rates.items())) + " samples/s", flush=True)
    return rates, "per-call graphs: %s. Whole step: %s" % (
        what_it_ran(trainings[DYNAMIC]), what_it_ran(trainings[WHOLE_STEP])), checks, compiled


def measure_inference(label, script, flags, warmup, rounds):
    trainings = mxnet_trainings(script, flags, MXNET_VARIANTS[:2])
    trainings["tvm"] = build(script, flags + ["--dynamic", "--backend", "tvm"])
    share_values(trainings[REFERENCE], trainings["tvm"])
    variants = {title: mxnet_steps(training, infer_call)
                for title, training in trainings.items()}
    rates = interleaved(variants, max(warmup, 24), max(rounds, 10), list(variants))
    print("inference %-38s imperative %9.1f  dynamic %9.1f  tvm %9.1f samples/s"
          % (label, rates[REFERENCE], rates[DYNAMIC], rates["tvm"]), flush=True)
    return rates, what_it_ran(trainings["tvm"])


def measure_scaling(script, batch, steps, repeats):
    """Samples/s (all workers) with 1 and 2 workers, each worker `batch` samples a step."""
    rates = {1: [], 2: []}
    plots = tempfile.mkdtemp()
    for _ in range(repeats):
        for size in (1, 2):
            outputs = local_workers.run(
                [sys.executable, os.path.join(TRAIN_DIR, script.NAME + ".py"), "--dynamic",
                 "--quiet", "--steps", str(steps), "--batch-size", str(batch * size),
                 "--plot", os.path.join(plots, "scaling.png")],
                size=size, env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=1800)
            rates[size].append(float(re.search(r"; ([\d.]+) samples/s", outputs[0][0]).group(1)))
    return {size: statistics.median(values) for size, values in rates.items()}


def bar_chart(path, labels, series, ylabel, log=False):
    """Grouped bars: `series` maps a legend entry to one value per label."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    x, width = np.arange(len(labels)), 0.8 / len(series)
    figure, axes = plt.subplots(figsize=(8, 3.8), dpi=100)
    for k, (name, values) in enumerate(series.items()):
        axes.bar(x + (k - (len(series) - 1) / 2) * width, values, width, label=name)
    axes.axhline(1.0, color="black", linewidth=0.8)
    if log:
        axes.set_yscale("log")
    axes.set_xticks(x, labels)
    axes.set_ylabel(ylabel)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def _measured(training):
    return {title for rates, *_ in training.values() for title in rates}


def mxnet_columns(training):
    """The MXNet training variants measured, in table order: gluon_dyn's and its
    reference, then those hybridized by hand."""
    return [title for title, _ in MXNET_VARIANTS + BY_HAND_VARIANTS
            if title in _measured(training)]


def columns(training):
    """The training variants measured, in table order: the MXNet ones, then PyTorch's."""
    return mxnet_columns(training) + [title for title in TORCH_TITLES.values()
                                      if title in _measured(training)]


def plot(figures, training, inference):
    labels = [short_name(label) for label, *_ in WORKLOADS]

    def ratios(results, variant, reference):
        return [results[label][0].get(variant, np.nan) / results[label][0][reference]
                for label, *_ in WORKLOADS]
    series = {title: ratios(training, title, REFERENCE) for title in columns(training)[1:]}
    series["JANUS (Table 3.4: GPU or 36-core CPU)"] = [w[3] for w in WORKLOADS]
    bar_chart(os.path.join(figures, "training_speedup.png"), labels, series,
              "training speed-up over MXNet imperative", log=True)
    if TORCH_TITLES["pytorch eager"] in columns(training):
        bar_chart(os.path.join(figures, "training_vs_pytorch.png"), labels,
                  {title: ratios(training, title, TORCH_TITLES["pytorch eager"])
                   for title in columns(training) if title != TORCH_TITLES["pytorch eager"]},
                  "training samples/s / PyTorch eager's", log=True)
    bar_chart(os.path.join(figures, "inference_speedup.png"), labels, {
        "dynamic (MXNet graphs)": ratios(inference, DYNAMIC, REFERENCE),
        'dynamic, backend="tvm"': ratios(inference, "tvm", REFERENCE)},
        "inference speed-up over imperative")


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            return re.search(r"model name\s*: (.*)", f.read()).group(1)
    except (OSError, AttributeError):
        return platform.processor() or "unknown CPU"


def check_cell(check):
    """A PyTorch variant's check result (training_twins.TwinCheck), as a table cell."""
    return "could not run: %s" % check.failure if check.failure else "%.1e" % check.difference


def training_section(training):
    """The training tables' lines."""
    titles = columns(training)
    lines = ["| workload (data, batch) | %s | JANUS speed-up |" % " | ".join(
                 "%s samples/s" % title for title in titles),
             "|---|%s---|" % ("---|" * len(titles))]
    for label, _, _, janus, _, _ in WORKLOADS:
        rates = training[label][0]
        cells = ["%.1f" % rates[title] if title == REFERENCE else
                 "%.1f (%.2fx)" % (rates[title], rates[title] / rates[REFERENCE])
                 if title in rates else "-" for title in titles]
        lines.append("| %s | %s | %.2fx |" % (label, " | ".join(cells), janus))
    lines += ["", "(x: samples/s over MXNet imperative's.)", "",
              "![training speed-ups](benchmarks/training_speedup.png)", ""]
    eager = TORCH_TITLES["pytorch eager"]
    if eager not in titles:
        return lines + ["PyTorch is not installed (`make setup` installs it): no PyTorch "
                        "columns.", ""]
    lines += ["![against PyTorch eager](benchmarks/training_vs_pytorch.png)", "",
              "### The PyTorch versions", "",
              "`benchmarks/torch_training.py`: each script written in PyTorch (same model, "
              "initial values, batches, loss, optimizer rule and hyper-parameters), run in a "
              "worker process of its own with a thread per physical core (PyTorch's default); "
              "`torch.compile` wraps each model (default mode), the loss, backward and "
              "optimizer step run as in eager. Before timing, each trained %d steps beside the "
              "script as written, without dropout: the largest relative difference of a step's "
              "loss (pass: <= %g; `benchmarks/training_twins.py` says why)." % (
                  training_twins.CHECK_STEPS, training_twins.RTOL), "",
              "| workload | PyTorch eager loss difference | torch.compile loss difference "
              "| what torch.compile did | what gluon_dyn ran |", "|---|---|---|---|---|"]
    for label, *_ in WORKLOADS:
        _, note, checks, compiled = training[label]
        lines.append("| %s | %s | %s | %s | %s |" % (
            label, check_cell(checks["pytorch eager"]), check_cell(checks["torch.compile"]),
            compiled or "-", note))
    slower = []
    for label, *_ in WORKLOADS:
        rates = training[label][0]
        behind = ["%s %.2fx" % (title, rates[title] / rates[eager])
                  for title in mxnet_columns(training)
                  if title in rates and rates[title] < rates[eager]]
        if behind:
            slower.append("- %s: %s" % (label, ", ".join(behind)))
    lines += ["", "### Where MXNet trains slower than PyTorch eager", "",
              "(samples/s over PyTorch eager's)", ""] + (slower or ["None."]) + [""]
    return lines


def write(out, training, inference, scaling, args, load):
    figures = os.path.join(os.path.dirname(out), "benchmarks")
    os.makedirs(figures, exist_ok=True)
    plot(figures, training, inference)
    lines = [
        "# Benchmarks: the JANUS workloads on this machine",
        "",
        "Written by `make report` (`%s`) on %s, %d cores (load average %.2f at the start, "
        "%.2f at the end: other jobs on the machine count). Each workload is a training script "
        "of `examples/train/` with its default settings, run as written (MXNet imperative), with "
        "`hybridize(dynamic=True)` (graphs kept only where measured faster, gluon_dyn's default), "
        "with `--whole-step` (those graphs, and each trainer's update of all parameters as a few "
        "fused MXNet calls: `gluon_dyn.fused_updates`), "
        "where its models can be rewritten as HybridBlocks hybridized by hand "
        "(`benchmarks/by_hand.py`: static_alloc and static_shape, with MXNet's Trainer, and "
        "with the whole step's fused update: MXNet's best hand-written step; - elsewhere) "
        "and as its PyTorch version, eager and with `torch.compile`; steps interleaved (each "
        "round starts one variant later; each variant's timed run of %d steps, one after the "
        "other as a training loop runs them, follows an untimed step of its own), the MXNet "
        "variants checked to compute the same losses over the warm-up steps, medians over "
        "runs of samples per second (an MXNet run is timed until MXNet finished its last "
        "step, so a step's queued backward and update overlap the next step's Python as in "
        "a loop; a PyTorch run inside its worker). MXNet's operators "
        "use %s, PyTorch %d threads. JANUS's speed-ups are from the seeds' Table 3.4 "
        "(TensorFlow 1.8 on a TITAN Xp GPU or a 36-core CPU): compare ratios, not "
        "samples/s." % (harness.command_line(), cpu_name(), os.cpu_count(), load[0],
                        os.getloadavg()[0], RUN_STEPS, mxnet_threads(), harness.cores()),
        "",
        "## Training",
        "",
    ] + training_section(training)
    lines += ["## Inference", "",
              "Runs of %d inference calls on fresh inputs, each read at once (LeNet and GAN: "
              "a batch; the LM: a 35 x 20 window; trees: one tree; CartPole: 20 decisions)."
              % RUN_STEPS, "",
              "| workload | imperative samples/s | dynamic samples/s | dynamic, backend=\"tvm\" samples/s "
              "| dynamic speed-up | tvm speed-up | what the tvm variant ran |",
              "|---|---|---|---|---|---|---|"]
    for label, *_ in WORKLOADS:
        rates, note = inference[label]
        lines.append("| %s | %.1f | %.1f | %.1f | %.2fx | %.2fx | %s |" % (
            label, rates[REFERENCE], rates[DYNAMIC], rates["tvm"],
            rates[DYNAMIC] / rates[REFERENCE], rates["tvm"] / rates[REFERENCE], note))
    lines += ["", "![inference speed-ups](benchmarks/inference_speedup.png)", "",
              "## Horovod scale factor", "",
              "The script with `--dynamic` as 1 and as 2 Horovod workers on 127.0.0.1 (Gloo), each "
              "worker with the same batch (JANUS's weak scaling) and `OMP_NUM_THREADS=1`; samples/s "
              "of all workers, median of %d runs. Scale factor = 2 workers / (2 x 1 worker)." % args.repeats,
              "", "| workload | batch per worker | 1 worker samples/s | 2 workers samples/s | scale factor |",
              "|---|---|---|---|---|"]
    for label, script, batch, _ in SCALING:
        rates = scaling[label]
        lines.append("| %s | %d | %.1f | %.1f | %.2f |" % (label, batch, rates[1], rates[2],
                                                           rates[2] / (2 * rates[1])))
    with open(out, "w") as f:
        f.write("\n".join(lines + [""]))
    print("wrote", out)


def mxnet_threads():
    """The OpenMP threads MXNet gives an operator in this run, and why."""
    for variable in ("MXNET_OMP_MAX_THREADS", "OMP_NUM_THREADS"):
        if variable in os.environ:
            return "%s threads (%s)" % (os.environ[variable], variable)
    return "%d thread(s) (MXNet's default: half the CPUs)" % max(1, (os.cpu_count() or 2) // 2)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    parser.add_argument("--rounds-scale", type=float, default=1.0,
                        help="multiply every workload's timed runs (fewer for a quick look)")
    parser.add_argument("--repeats", type=int, default=2, help="Horovod runs per worker count")
    parser.add_argument("--only", type=lambda names: [option_name(n) for n in names.split(",")],
                        help="a look at some workloads (names as in the plots, comma-separated: "
                             "lenet,lstmlm,treernn,treelstm,reinforce,gan): their training "
                             "only, printed, nothing written")
    args = parser.parse_args()
    load = os.getloadavg()
    training, inference = {}, {}
    for label, script, flags, _, warmup, rounds in WORKLOADS:
        if args.only and option_name(short_name(label)) not in args.only:
            continue
        rounds = max(2, int(rounds * args.rounds_scale))
        training[label] = measure_training(label, script, flags, warmup, rounds)
        if args.only:
            print("          %s: %s" % (short_name(label), training[label][1]), flush=True)
            continue
        inference[label] = measure_inference(label, script, flags, warmup, rounds)
    if args.only:
        return
    scaling = {}
    for label, script, batch, steps in SCALING:
        scaling[label] = measure_scaling(script, batch, steps, args.repeats)
        print("horovod   %-38s 1 worker %9.1f  2 workers %9.1f samples/s"
              % (label, scaling[label][1], scaling[label][2]), flush=True)
    write(args.out, training, inference, scaling, args, load)


if __name__ == "__main__":
    main()
