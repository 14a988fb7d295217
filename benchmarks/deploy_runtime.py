"""Deployment from C and Java: what the runtime adds per call, and tvm_bridge plans from C.

    python benchmarks/deploy_runtime.py --rounds 7 --repeats 1000

(a) Per-call time of the C runtime (gd_model_run) and of the Java binding (Model.run) against
    MXNet's own CachedOp invocation of the same exported graph from C (input NDArrays created
    and filled, MXInvokeCachedOpEx, outputs waited for and read, handles freed), for a small
    Dense model and the deploy example's model (foreach + while_loop + cond). The C program
    interleaves the two call by call and first checks they give the same outputs.
(b) A tvm_bridge plan (compile_block(..., choose_by_measurement=False).export: every segment
    TVM compiles runs on TVM) run from C against the same plan run from Python by
    tvm_bridge/deploy_loader.py (plan_from_python.py: inputs made from numpy arrays each call,
    outputs waited for): an unrolled LSTM (hidden 64, 50 steps, batch 1) and the deploy
    example's model, whose plan keeps its _while_loop and _cond in MXNet.
Each round runs every variant in a process of its own, one after the other (medians of
`--repeats` calls after a warm-up); the table gives the medians of the rounds. Every variant's
first output is checked against the block's. Needs `make runtime java` (the Makefile's set-up).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

from tvm_bridge.runtime import configure_threads

configure_threads()  # before TVM's thread pool starts

import mxnet as mx  # noqa: E402
import numpy as np  # noqa: E402
from mxnet import gluon  # noqa: E402

import tvm_bridge  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BUILD = os.path.join(REPO, "build")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "examples", "deploy"))
from small_lstm import BATCH, INPUT, STEPS, UnrolledLSTM  # noqa: E402
from train_and_export import FEATURES, SequenceScorer  # noqa: E402
from plan_from_python import arrays_of  # noqa: E402

def first_output(block, arrays):
    with mx.autograd.pause():
        out = block(*[mx.nd.array(a) for a in arrays])
    return float((out[0] if isinstance(out, (list, tuple)) else out).asnumpy().ravel()[0])


def initialized(block, *arrays):
    mx.random.seed(0)
    block.initialize(mx.init.Xavier())
    block.hybridize()
    first_output(block, arrays)
    return block


def build_programs(workdir):
    for path in ("libgluon_dyn_runtime.so", "gluon_dyn.jar"):
        if not os.path.exists(os.path.join(BUILD, path)):
            sys.exit("build/%s is missing: run `make runtime java` first" % path)
    program = os.path.join(workdir, "runtime_overhead")
    subprocess.run(["cc", "-O2", "-std=c99", "-Wall", "-I" + os.path.join(REPO, "src", "runtime"),
                    os.path.join(HERE, "native", "runtime_overhead.c"), "-o", program,
                    "-L" + BUILD, "-lgluon_dyn_runtime", "-Wl,-rpath," + BUILD, "-ldl", "-lm"],
                   check=True)
    subprocess.run(["javac", "-cp", os.path.join(BUILD, "gluon_dyn.jar"), "-d", workdir,
                    os.path.join(HERE, "native", "RuntimeOverhead.java")], check=True)
    return program


def run(command):
    """The timings and first output a benchmark program printed, and its output."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800,
                          env={"PATH": os.environ["PATH"]})
    if done.returncode != 0:
        sys.exit("%s failed:\n%s%s" % (command[0], done.stdout, done.stderr[-3000:]))
    values = {name: float(value) for name, value in re.findall(r"(\w+_us|first_output) (\S+)",
                                                               done.stdout)}
    return values, done.stdout


def check(name, variant, got, want):
    if not np.isclose(got, want, rtol=1e-4, atol=1e-5):
        sys.exit("%s: %s gives %r, the block %r" % (name, variant, got, want))


def print_table(header, rows):
    print("\n| %s |\n|%s" % (" | ".join(header), "---|" * len(header)))
    for row in rows:
        print("| %s |" % " | ".join(row))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=1000)
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="deploy_bench_")
    program = build_programs(workdir)
    libmxnet = os.path.join(os.path.dirname(mx.__file__), "libmxnet.so")
    jar = os.path.join(BUILD, "gluon_dyn.jar")

    dense_inputs = ["1x%d" % FEATURES]
    dense = gluon.nn.HybridSequential()
    dense.add(gluon.nn.Dense(8, in_units=FEATURES, activation="tanh"),
              gluon.nn.Dense(3, in_units=8))
    scorer_inputs = ["5x2x%d" % FEATURES, "1=2"]
    lstm_inputs = ["%dx%dx%d" % (STEPS, BATCH, INPUT)]
    graphs = [("Dense 4-8-3, batch 1", initialized(dense, *arrays_of(dense_inputs)),
               dense_inputs),
              ("foreach + while_loop + cond (deploy example), 5 rows, batch 2, 2 steps",
               initialized(SequenceScorer(), *arrays_of(scorer_inputs)), scorer_inputs),
              ("LSTM hidden 64, 50 steps, batch 1 (MXNet graph)",
               initialized(UnrolledLSTM(), *arrays_of(lstm_inputs)), lstm_inputs)]
    plans = [("LSTM hidden 64, 50 steps, batch 1", graphs[2][1], lstm_inputs),
             ("deploy example (while_loop and cond kept)", graphs[1][1], scorer_inputs)]
    rows = {}
    for k, (name, block, inputs) in enumerate(graphs):
        prefix = os.path.join(workdir, "graph%d" % k)
        block.export(prefix)
        rows[name] = {"prefix": prefix, "inputs": inputs, "want": first_output(
            block, arrays_of(inputs)), "baseline_us": [], "runtime_us": [], "java_us": []}
    for k, (name, block, inputs) in enumerate(plans):
        # Every segment TVM compiles runs on TVM (no choice by measurement): the plans
        # compared are the same TVM plans in both languages.
        compiled = tvm_bridge.compile_block(block, *[mx.nd.array(a) for a in arrays_of(inputs)],
                                            cache_dir=os.path.join(workdir, "cache"),
                                            choose_by_measurement=False)
        prefix = os.path.join(workdir, "plan%d" % k)
        with open(compiled.export(prefix)) as f:
            steps = json.load(f)["steps"]
        rows["plan: " + name] = {"prefix": prefix, "inputs": inputs, "runtime_us": [],
                                 "python_us": [], "want": first_output(block, arrays_of(inputs)),
                                 "backends": ["%s (%d ops)" % (s["backend"], s["ops"])
                                              for s in steps]}

    for _ in range(args.rounds):
        for name, row in rows.items():
            repeats = str(args.repeats)
            if name.startswith("plan: "):
                values, stdout = run([program, "runtime", row["prefix"], repeats] + row["inputs"])
                check(name, "the C runtime", values["first_output"], row["want"])
                row["report"] = stdout.strip().splitlines()[-1]
                python, _ = run([sys.executable, os.path.join(HERE, "plan_from_python.py"),
                                 row["prefix"], repeats] + row["inputs"])
                check(name, "deploy_loader", python["first_output"], row["want"])
                row["python_us"].append(python["python_us"])
            else:
                values, _ = run([program, "compare", libmxnet, row["prefix"], repeats]
                                + row["inputs"])
                check(name, "the C runtime", values["first_output"], row["want"])
                row["baseline_us"].append(values["baseline_us"])
                java, _ = run(["java", "-cp", "%s:%s" % (jar, workdir), "RuntimeOverhead",
                               row["prefix"], repeats] + row["inputs"])
                check(name, "the Java binding", java["first_output"], row["want"])
                row["java_us"].append(java["java_us"])
            row["runtime_us"].append(values["runtime_us"])

    med = {name: {key: statistics.median(value) for key, value in row.items()
                  if key.endswith("_us")} for name, row in rows.items()}
    print_table(["model", "MXNet CachedOp from C, us", "C runtime, us", "C runtime overhead, us",
                 "Java binding, us", "Java overhead, us"],
                [[name, "%.1f" % m["baseline_us"], "%.1f" % m["runtime_us"],
                  "%+.1f" % (m["runtime_us"] - m["baseline_us"]), "%.1f" % m["java_us"],
                  "%+.1f" % (m["java_us"] - m["baseline_us"])]
                 for name, m in med.items() if "baseline_us" in m])
    plan_names = [name for name in med if "python_us" in med[name]]
    print_table(["tvm_bridge plan", "from C, us", "from Python (deploy_loader), us", "C speed-up",
                 "steps"],
                [[name[len("plan: "):], "%.1f" % med[name]["runtime_us"],
                  "%.1f" % med[name]["python_us"],
                  "%.2fx" % (med[name]["python_us"] / med[name]["runtime_us"]),
                  ", ".join(rows[name]["backends"])] for name in plan_names])
    for name in plan_names:
        print("%s, C runtime: %s" % (name, rows[name]["report"]))
    print("\n%d rounds x %d calls; per round the medians; the table the medians of the rounds."
          % (args.rounds, args.repeats))


if __name__ == "__main__":
    main()
