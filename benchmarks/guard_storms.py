"""Guard storms: what a program whose assumptions fail on every call costs.

Each storm of tests/storm_programs.py (a branch alternating every call, a trip
count changing every call, a batch size changing every call with and without the
code reading it, a Python value changing every call) runs as an imperative Block
and under hybridize(dynamic=True), calls interleaved (imperative call k, dynamic
call k, ...), inference. Prints, per storm, the median per-call time after
warm-up and the total over all calls (traces and failed guards included), and
the ratio dynamic / imperative (the bound is 1.5).
"""
import argparse
import os
import statistics
import sys
import time

import mxnet as mx

import gluon_dyn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from storm_programs import STORMS  # noqa: E402


def timed_call(block, call):
    args = block.arguments(call)
    start = time.perf_counter()
    block(*args).wait_to_read()
    return (time.perf_counter() - start) * 1000


def measure(storm, calls, warmup, options):
    imperative, dynamic = storm(), storm()
    for block in (imperative, dynamic):
        block.initialize(mx.init.Constant(0.05))
    dynamic.hybridize(dynamic=True, **options)
    times = {"imperative": [], "dynamic": []}
    for call in range(calls):
        times["imperative"].append(timed_call(imperative, call))
        times["dynamic"].append(timed_call(dynamic, call))
    steady = {name: statistics.median(values[warmup:]) for name, values in times.items()}
    total = {name: sum(values) for name, values in times.items()}
    return steady, total, gluon_dyn.hybridize.report(dynamic)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=50)
    args = parser.parse_args()
    configurations = (("default", {}),
                      ("forced speculation (profile_calls=1, max_guard_failures=3)",
                       {"profile_calls": 1, "max_guard_failures": 3}))
    print("%d calls per storm; steady = median of calls %d..%d" % (args.calls, args.warmup,
                                                                  args.calls))
    print("| storm | configuration | imperative ms (steady) | dynamic ms (steady) | ratio steady "
          "| ratio total | what the runner did |")
    print("|---|---|---|---|---|---|---|")
    for storm in STORMS:
        for label, options in configurations:
            steady, total, report = measure(storm, args.calls, args.warmup, options)
            did = report["fallback"] and "runs as Python: " + report["fallback"][:60] or \
                "%d traces, %d guard failures, %d graphs" % (
                    report["traces"], len(report["guard_failures"]), report["cached_graphs"])
            print("| %s | %s | %.3f | %.3f | %.2fx | %.2fx | %s |" % (
                storm.__name__, label, steady["imperative"], steady["dynamic"],
                steady["dynamic"] / steady["imperative"], total["dynamic"] / total["imperative"],
                did), flush=True)


if __name__ == "__main__":
    main()
