"""`make report`: the JANUS workloads (the seeds' Table 3.4) on this machine.

Each training script of examples/train runs as written (imperative) and with
hybridize(dynamic=True), steps interleaved (A, B, B, A, ...), both variants
checked to produce the same losses first; throughput is the median over steps
of samples per second, timed until MXNet finished the step. Inference compares
imperative, dynamic and dynamic with backend="tvm" on fresh inputs (outputs
checked against the imperative ones). The Horovod scale factor runs a script
with 1 and with 2 workers on 127.0.0.1 (each worker keeps its batch: JANUS's
weak scaling). Writes docs/benchmarks.md and PNG plots beside it.
"""
import argparse
import os
import platform
import re
import statistics
import sys
import tempfile
import time

import mxnet as mx
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TRAIN_DIR = os.path.join(ROOT, "examples", "train")
sys.path.insert(0, TRAIN_DIR)

import cartpole  # noqa: E402
import gan  # noqa: E402
import lenet  # noqa: E402
import lstm_lm  # noqa: E402
import tree_sentiment  # noqa: E402
import trainkit  # noqa: E402
from trainkit import local_workers  # noqa: E402
from trainkit.run import parse_args, step_seed  # noqa: E402

# label, script, extra flags, JANUS's speed-up over imperative (Table 3.4),
# warm-up steps, timed steps per variant
WORKLOADS = [
    ("LeNet (digits 8x8, batch 50)", lenet, [], 3.25, 20, 40),
    ("LSTM LM (stdlib text, batch 20)", lstm_lm, [], 8.03, 8, 16),
    ("TreeRNN (generated trees, batch 25)", tree_sentiment, ["--cell", "rnn"], 47.6, 3, 5),
    ("TreeLSTM (generated trees, batch 25)", tree_sentiment, ["--cell", "lstm"], 18.4, 3, 5),
    ("REINFORCE (CartPole, 20 envs)", cartpole, [], 5.13, 4, 10),
    ("GAN (digits 8x8, batch 128)", gan, [], 2.61, 20, 40),
]
SCALING = [("LeNet", lenet, 50, 60), ("LSTM LM", lstm_lm, 20, 30)]   # per-worker batch, steps


def build(script, flags):
    args = parse_args(script, ["--quiet"] + flags)
    return script.TRAINING(args, trainkit.Workers())


def what_it_ran(training):
    """What gluon_dyn did with the blocks, from its reports."""
    import gluon_dyn
    notes = []
    for name, block in training.blocks.items():
        report = gluon_dyn.hybridize.report(block)
        if report["fallback"]:
            notes.append("%s runs as Python (the imperative code: a difference is noise): %s"
                         % (name, report["fallback"].split(";")[0]))
        elif report["calls"]["by_kind"]["recursion"]:
            notes.append("%s: recursion engine, %d of %d calls" % (
                name, report["calls"]["by_kind"]["recursion"], report["calls"]["total"]))
        else:
            notes.append("%s: graphs: %d" % (name, report["cached_graphs"]))
    return "; ".join(notes)


def interleaved(variants, first, warmup, timed, run):
    """Median samples/s of each variant; `run(variant, index, rng)` -> (value, samples).
    Warm-up steps also check that every variant computes what the first one does."""
    names = list(variants)
    for index in range(first, first + warmup):
        values = {}
        for name in names:
            seed = step_seed(argparse.Namespace(seed=0), index, 0)
            mx.random.seed(seed)
            values[name] = run(variants[name], index, np.random.RandomState(seed))[0]
        reference = values[names[0]]
        for name in names[1:]:
            np.testing.assert_allclose(values[name], reference, rtol=1e-3, atol=1e-4,
                                       err_msg="%s disagrees with %s" % (name, names[0]))
    rates = {name: [] for name in names}
    for k, index in enumerate(range(first + warmup, first + warmup + timed)):
        for name in (names if k % 2 == 0 else names[::-1]):
            seed = step_seed(argparse.Namespace(seed=0), index, 0)
            mx.random.seed(seed)
            rng = np.random.RandomState(seed)
            mx.nd.waitall()
            start = time.perf_counter()
            _, samples = run(variants[name], index, rng)
            mx.nd.waitall()
            rates[name].append(samples / (time.perf_counter() - start))
    return {name: statistics.median(values) for name, values in rates.items()}


def train_step(training, index, rng):
    loss, samples = training.step(index, rng)
    return np.array(loss), samples


def infer_call(training, index, rng):
    from mxnet import autograd
    with autograd.predict_mode():
        output, samples = training.infer(rng)
    return output.asnumpy(), samples


def measure_training(label, script, flags, warmup, timed):
    variants = {"imperative": build(script, flags), "dynamic": build(script, flags + ["--dynamic"])}
    rates = interleaved(variants, 0, warmup, timed, train_step)
    print("training  %-38s imperative %9.1f  dynamic %9.1f samples/s  (%.2fx)"
          % (label, rates["imperative"], rates["dynamic"], rates["dynamic"] / rates["imperative"]),
          flush=True)
    return rates, what_it_ran(variants["dynamic"])


def measure_inference(label, script, flags, warmup, timed):
    variants = {"imperative": build(script, flags), "dynamic": build(script, flags + ["--dynamic"]),
                "tvm": build(script, flags + ["--dynamic", "--backend", "tvm"])}
    rates = interleaved(variants, 0, max(warmup, 24), max(timed, 40), infer_call)
    print("inference %-38s imperative %9.1f  dynamic %9.1f  tvm %9.1f samples/s"
          % (label, rates["imperative"], rates["dynamic"], rates["tvm"]), flush=True)
    return rates, what_it_ran(variants["tvm"])


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


def plot(path_training, path_inference, training, inference):
    labels = [label.split(" (")[0] for label, *_ in WORKLOADS]

    def speedups(results, variant):
        return [results[label][0][variant] / results[label][0]["imperative"]
                for label, *_ in WORKLOADS]
    bar_chart(path_training, labels, {
        "gluon_dyn dynamic (this machine, 2 CPU cores)": speedups(training, "dynamic"),
        "JANUS (Table 3.4: GPU or 36-core CPU)": [w[3] for w in WORKLOADS]},
        "training speed-up over imperative", log=True)
    bar_chart(path_inference, labels, {
        "dynamic (MXNet graphs)": speedups(inference, "dynamic"),
        'dynamic, backend="tvm"': speedups(inference, "tvm")},
        "inference speed-up over imperative")


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            return re.search(r"model name\s*: (.*)", f.read()).group(1)
    except (OSError, AttributeError):
        return platform.processor() or "unknown CPU"


def write(out, training, inference, scaling, args):
    figures = os.path.join(os.path.dirname(out), "benchmarks")
    os.makedirs(figures, exist_ok=True)
    plot(os.path.join(figures, "training_speedup.png"), os.path.join(figures, "inference_speedup.png"),
         training, inference)
    lines = [
        "# Benchmarks: the JANUS workloads on this machine",
        "",
        "Written by `make report` (`%s benchmarks/training_report.py%s`) on %s, %d cores. "
        "Each workload is a training script of `examples/train/` with its default settings, run as "
        "written (imperative) and with `hybridize(dynamic=True)` (graphs kept only where measured "
        "faster, gluon_dyn's default); steps interleaved, both variants checked to compute the same "
        "losses first, medians over steps of samples per second (a step is timed until MXNet "
        "finished it). JANUS's speed-ups are from the seeds' Table 3.4 (TensorFlow 1.8 on a TITAN Xp "
        "GPU or a 36-core CPU): compare ratios, not samples/s." % (
            os.path.relpath(sys.executable, ROOT) if sys.executable.startswith(ROOT) else "python",
            (" --timed-scale %g" % args.timed_scale) if args.timed_scale != 1 else "",
            cpu_name(), os.cpu_count()),
        "",
        "## Training",
        "",
        "| workload (data, batch) | imperative samples/s | dynamic samples/s | speed-up | JANUS speed-up | what gluon_dyn ran |",
        "|---|---|---|---|---|---|",
    ]
    for label, _, _, janus, _, _ in WORKLOADS:
        rates, note = training[label]
        lines.append("| %s | %.1f | %.1f | %.2fx | %.2fx | %s |" % (
            label, rates["imperative"], rates["dynamic"], rates["dynamic"] / rates["imperative"],
            janus, note))
    lines += ["", "![training speed-ups](benchmarks/training_speedup.png)", "",
              "## Inference", "",
              "One inference call on fresh inputs (LeNet and GAN: a batch; the LM: a 35 x 20 "
              "window; trees: one tree; CartPole: 20 decisions).", "",
              "| workload | imperative samples/s | dynamic samples/s | dynamic, backend=\"tvm\" samples/s "
              "| dynamic speed-up | tvm speed-up | what the tvm variant ran |",
              "|---|---|---|---|---|---|---|"]
    for label, *_ in WORKLOADS:
        rates, note = inference[label]
        lines.append("| %s | %.1f | %.1f | %.1f | %.2fx | %.2fx | %s |" % (
            label, rates["imperative"], rates["dynamic"], rates["tvm"],
            rates["dynamic"] / rates["imperative"], rates["tvm"] / rates["imperative"], note))
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
    lines += ["", "PyTorch eager columns are not measured for these workloads (no PyTorch versions "
              "of the training scripts).", ""]
    with open(out, "w") as f:
        f.write("\n".join(lines))
    print("wrote", out)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    parser.add_argument("--timed-scale", type=float, default=1.0,
                        help="multiply every workload's timed steps (fewer for a quick look)")
    parser.add_argument("--repeats", type=int, default=2, help="Horovod runs per worker count")
    args = parser.parse_args()
    training, inference = {}, {}
    for label, script, flags, _, warmup, timed in WORKLOADS:
        timed = max(2, int(timed * args.timed_scale))
        training[label] = measure_training(label, script, flags, warmup, timed)
        inference[label] = measure_inference(label, script, flags, warmup, timed)
    scaling = {}
    for label, script, batch, steps in SCALING:
        scaling[label] = measure_scaling(script, batch, steps, args.repeats)
        print("horovod   %-38s 1 worker %9.1f  2 workers %9.1f samples/s"
              % (label, scaling[label][1], scaling[label][2]), flush=True)
    write(args.out, training, inference, scaling, args)


if __name__ == "__main__":
    main()
