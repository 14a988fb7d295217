"""Guard storms: what a program whose assumptions fail on every call costs.

Each storm of tests/storm_programs.py (a branch alternating every call, a trip
count changing every call, a batch size changing every call with and without the
code reading it, a Python value changing every call) runs as an imperative Block
and under hybridize(dynamic=True), calls interleaved (imperative call k, dynamic
call k, ...), inference, every output checked against the imperative one and
every call on new arrays (benchmarks/harness.py). Prints, per storm, the median
per-call time after warm-up and the total over all calls (traces and failed
guards included), and the ratio dynamic / imperative (the bound is 1.5).
"""
import argparse
import os
import statistics
import sys

import mxnet as mx

import gluon_dyn
import harness

sys.path.insert(0, os.path.join(harness.REPO, "tests"))
from storm_programs import STORMS  # noqa: E402


def storm_call(block):
    """`run` for a storm: the user's change to the block, then the call."""
    def run(call, *arrays):
        block.prepare_call(call)
        return block(*arrays)
    return run


def measure(storm, calls, warmup, options):
    imperative, dynamic = storm(), storm()
    for block in (imperative, dynamic):
        block.initialize(mx.init.Constant(0.05))
    dynamic.hybridize(dynamic=True, **options)
    times = harness.run_calls(
        [harness.Variant("imperative", storm_call(imperative), rtol=1e-5, atol=1e-6),
         harness.Variant("dynamic", storm_call(dynamic), rtol=1e-5, atol=1e-6)],
        lambda call: (call,) + storm.arguments(call), calls)
    steady = {name: statistics.median(values[warmup:]) for name, values in times.items()}
    total = {name: sum(values) for name, values in times.items()}
    return steady, total, gluon_dyn.hybridize.report(dynamic)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=50)
    args = parser.parse_args()
    configurations = (("default", {}),
                      ("forced speculation (profile_calls=1, max_guard_failures=3)",
                       {"profile_calls": 1, "max_guard_failures": 3}))
    rows = []
    for storm in STORMS:
        for label, options in configurations:
            steady, total, report = measure(storm, args.calls, args.warmup, options)
            did = report["fallback"] and "runs as Python: " + report["fallback"][:60] or \
                "%d traces, %d guard failures, %d graphs" % (
                    report["traces"], len(report["guard_failures"]), report["cached_graphs"])
            rows.append([storm.__name__, label, steady["imperative"], steady["dynamic"],
                         "%.2fx" % (steady["dynamic"] / steady["imperative"]),
                         "%.2fx" % (total["dynamic"] / total["imperative"]), did])
    harness.print_table(
        "%d calls per storm; steady = median of calls %d..%d" % (args.calls, args.warmup,
                                                                args.calls),
        ["storm", "configuration", "imperative ms (steady)", "dynamic ms (steady)",
         "ratio steady", "ratio total", "what the runner did"], rows)


if __name__ == "__main__":
    main()
