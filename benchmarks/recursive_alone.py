"""The models of recursive_models.py, each variant timed alone in its own process.

recursive_models.py interleaves its variants call by call, as every benchmark
here does (PyTorch's in a worker process). On the 2-core machine whichever runs
after the other's threads spun waits for them, and under load from other
processes PyTorch's two threads lose by tens of milliseconds a tree (its rows
there swing from 0.5 to 300 ms). Here each round starts one process per variant
in turn (imperative, dynamic, PyTorch eager with one thread and with two, in a
worker of its own), each warming up and then timing the same stream of new
trees; outputs of every process are checked against the imperative one's (one
call per round), and the table gives per variant the median over all rounds'
timed calls.
"""
import argparse
import contextlib
import json
import os
import subprocess
import sys

import mxnet as mx
import numpy as np

import harness
import recursive_models

VARIANTS = ("imperative", "dynamic", "pytorch eager, 1 thread", "pytorch eager, 2 threads")


def child(args):
    """Times `args.variant` alone; prints {"ms": [...], "output": [...]} as JSON."""
    title, model = {"treelstm": ("Tree-LSTM", recursive_models.TreeLSTM),
                    "treernn": ("TreeRNN", recursive_models.TreeRNN)}[args.model]
    mx.random.seed(0)
    block = model()
    block.initialize(mx.init.Xavier())
    stream = recursive_models.make_stream(args.seed, args.per_call)
    with contextlib.ExitStack() as workers:
        if args.variant.startswith("pytorch"):
            threads = int(args.variant.split(", ")[1].split()[0])
            variant, = recursive_models.torch_variants(workers, block, args.train, threads)
        else:
            if args.variant == "dynamic":
                block.hybridize(dynamic=True)
            variant = harness.Variant(args.variant, harness.gluon_call(block, args.train))
        for call in range(recursive_models.WARMUP):
            harness.timed_call(variant, variant.prepare(stream(call)))
        calls = range(recursive_models.WARMUP, recursive_models.WARMUP + args.calls)
        inputs = [variant.prepare(stream(call)) for call in calls]
        mx.nd.waitall()
        times, first = [], None
        for arguments in inputs:
            output, ms = harness.timed_call(variant, arguments)
            times.append(ms / args.per_call)
            if first is None:
                first = [array.tolist() for array in harness.as_numpy(output)]
    print(json.dumps({"ms": times, "output": first, "title": title}))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="treernn", choices=["treernn", "treelstm"])
    parser.add_argument("--per-call", type=int, default=1)
    parser.add_argument("--train", action="store_true")
    parser.add_argument("--calls", type=int, default=100, help="timed calls per process")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variant", help=argparse.SUPPRESS)   # set in the child processes
    args = parser.parse_args()
    if args.variant:
        return child(args)
    variants = [variant for variant in VARIANTS
                if not variant.startswith("pytorch") or harness.torch_installed()]
    times = {variant: [] for variant in variants}
    for _ in range(args.rounds):
        results = {}
        for variant in variants:
            command = [sys.executable, os.path.abspath(__file__)] + sys.argv[1:] + [
                "--variant", variant]
            line = subprocess.run(command, check=True, capture_output=True,
                                  text=True).stdout.strip().splitlines()[-1]
            results[variant] = json.loads(line)
            times[variant] += results[variant]["ms"]
        reference = results["imperative"]["output"]
        for variant, result in results.items():
            for got, want in zip(result["output"], reference):
                if not np.allclose(got, want, rtol=1e-4, atol=1e-5):
                    raise SystemExit("%s computed other outputs than imperative" % variant)
    medians = {variant: float(np.median(ms)) for variant, ms in times.items()}
    harness.print_table(
        "%s, %d tree%s per call, %s, each variant alone in its process (%d rounds of %d new "
        "trees), ms per tree" % (results["imperative"]["title"], args.per_call,
                                 "s" if args.per_call > 1 else "",
                                 "training" if args.train else "inference", args.rounds,
                                 args.calls * args.per_call),
        ["variant", "ms per tree", "vs imperative"],
        [[variant, ms, harness.ratio(medians["imperative"], ms)]
         for variant, ms in medians.items()])


if __name__ == "__main__":
    main()
