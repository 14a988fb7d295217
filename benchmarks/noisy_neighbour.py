"""Measured choices with a busy neighbour: do the plans chosen under load stay the fast ones?

The small LSTM (small_lstm.py's LoopLSTM: a plain Block looping over LSTMCell, hidden 64,
batch 1, 50 steps) under hybridize(dynamic=True, backend="tvm"). `--blocks` fresh blocks are
built while a busy process keeps the last CPU loaded (numpy matrix products, one thread, pinned
there): each block profiles, traces, compiles its TVM plan and chooses between the plan and
one MXNet graph by measurement (gluon_dyn.measure.MeasuredChoice) with the neighbour running.
The blocks then serve calls with the neighbour running, and again once it has stopped.

Beside them, in the same interleaved rounds (benchmarks/harness.py: outputs checked against
the imperative run, fresh inputs, warm-up, medians), the two alternatives each block chooses
between, forced: the TVM plan (no choice by measurement) and one MXNet graph
(hybridize(dynamic=True)). A robust choice keeps every block within noise of the faster
alternative, under load and after it; each block's row says what it chose and what its
choice compared (the report's history).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import mxnet as mx

import gluon_dyn
import harness
from small_lstm import BATCH, INPUT, STEPS, LoopLSTM

WARMUP = 40

# The busy neighbour: a single-threaded numpy loop, until killed.
NEIGHBOUR = """
import os, numpy as np
os.sched_setaffinity(0, {%d})
a = np.random.rand(512, 512).astype(np.float32)
while True:
    a = np.tanh(a @ a)
"""


def start_neighbour():
    cpu = max(os.sched_getaffinity(0))
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    return subprocess.Popen([sys.executable, "-c", NEIGHBOUR % cpu], env=env), cpu


def blocks(count, cache_dir):
    """The imperative reference, `count` blocks choosing by measurement, and the two
    alternatives forced; all with the same weights."""
    mx.random.seed(0)
    names = ["imperative"] + ["tvm, measured choice %d" % k for k in range(1, count + 1)] + \
        ["tvm plan (forced)", "one mxnet graph"]
    nets = {name: LoopLSTM() for name in names}
    for net in nets.values():
        net.initialize(mx.init.Xavier())
    harness.copy_params(nets["imperative"], *list(nets.values())[1:])
    for name, net in nets.items():
        if name.startswith("tvm"):
            options = {"cache_dir": cache_dir}
            if "forced" in name:
                options["choose_by_measurement"] = False
            net.hybridize(dynamic=True, backend="tvm", backend_options=options)
        elif name == "one mxnet graph":
            net.hybridize(dynamic=True)
    return nets


def chosen(net):
    """What a measured block serves calls with, and the last decision of each of its
    choices (graph or forward as written; the TVM plan or one MXNet graph)."""
    report = gluon_dyn.hybridize.report(net)
    plans = report["tvm"]["plans"] if report["tvm"] else []
    if report["speed_check"]["state"] != "graph chosen":
        what = "python (%s)" % report["speed_check"]["state"]
    elif plans and plans[0]["runs"] == "segments":
        what = "tvm plan (%s)" % ", ".join(sorted({s["backend"] for s in plans[0]["segments"]}))
    else:
        what = "one mxnet graph"
    decisions = [(label, choice["history"]) for label, choice in (
        ("graph or python", report["speed_check"]),
        ("plan or one graph", plans[0]["choice"] if plans else None)) if choice]
    return what, "; ".join("%s, %d measurements, last at call %d: %s (%s)" % (
        label, len(history), history[-1]["call"], history[-1]["why"],
        ", ".join("%s %.3f ms" % item for item in history[-1]["times_ms"].items()))
        for label, history in decisions if history)


def phase(title, nets, repeats, first_call):
    variants = [harness.Variant(name, harness.gluon_call(net)) for name, net in nets.items()]
    # The warm-up covers the blocks' first measurements (profiling, tracing, the
    # plan's build, the speed check's alternating calls and their confirmation).
    timings = harness.compare(
        variants, lambda call: (harness.normal_array((STEPS, BATCH, INPUT), first_call + call),),
        repeats, warmup=WARMUP)
    ms = {name: timing.median_ms for name, timing in timings.items()}
    best = min(ms["tvm plan (forced)"], ms["one mxnet graph"])
    rows = [[name, ms[name], harness.ratio(ms[name], best) if name != "imperative" else "-",
             *(chosen(net) if "measured" in name else ("-", "-"))]
            for name, net in nets.items()]
    harness.print_table(title, ["variant", "ms per call", "x the faster alternative",
                                "serves calls with", "its choices"], rows)
    return ms


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=3, help="blocks choosing by measurement")
    parser.add_argument("--repeats", type=int, default=120,
                        help="timed calls per variant per phase")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache_dir:
        nets = blocks(args.blocks, cache_dir)
        neighbour, cpu = start_neighbour()
        try:
            phase("built and run with a busy process on CPU %d" % cpu, nets, args.repeats, 0)
        finally:
            neighbour.kill()
            neighbour.wait()
        phase("the same blocks after the neighbour stopped", nets, args.repeats, 10000)


if __name__ == "__main__":
    main()
