"""What a profiling call costs against the same call without gluon_dyn, on the corpus.

A block's first `profile_calls` calls (and a call whose guard failed) run as
written while the truth tests of its tensors are recorded (truth_probes.py).
Each corpus program's inference call runs on an imperative block and on its twin
hybridized with every call profiled (`profile_calls` beyond the calls made),
interleaved on the same fresh inputs (benchmarks/harness.py: outputs checked in
the warm-up calls, medians of the timed ones). The issue allows a profiling call
20% more than the imperative one.

    python benchmarks/profiling_calls.py [PROGRAM ...]
"""
import argparse
import sys
import warnings

import harness  # noqa: F401  (first: sets MXNet's threads, runs this again if needed)

from corpus_report import inference_run  # noqa: E402  (puts tests/ on the path)
import corpus  # noqa: E402
from corpus.program import SEED  # noqa: E402
from dynamic_twins import twins  # noqa: E402

WARMUP, REPEATS = 5, 20
TIMED_BUDGET_S = 2.0
ALLOWED = 1.2   # a profiling call's time over the imperative call's
EVERY_CALL = 10 ** 9


def cost(program):
    """(imperative ms, profiling ms) of `program`'s inference call, medians."""
    with program.scope(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        imperative, profiled = twins(program.make, seed=SEED, initialized=True,
                                     methods=program.methods, profile_calls=EVERY_CALL)
        variants = [harness.Variant("imperative", inference_run(program, imperative),
                                    self_timed=True),
                    harness.Variant("profiling", inference_run(program, profiled),
                                    self_timed=True)]
        timings = harness.compare(variants, program.inputs, REPEATS, warmup=WARMUP,
                                  budget_ms=1000 * TIMED_BUDGET_S)
    return timings["imperative"].median_ms, timings["profiling"].median_ms


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("programs", nargs="*", help="corpus programs (default: all)")
    names = parser.parse_args(argv).programs
    programs = [corpus.named(name) for name in names] if names else corpus.programs()
    print("| program | imperative (ms) | profiling (ms) | profiling / imperative |")
    print("|---|---|---|---|")
    over = []
    for program in programs:
        imperative_ms, profiling_ms = cost(program)
        ratio = profiling_ms / imperative_ms
        if ratio > ALLOWED:
            over.append(program.name)
        print("| %s | %.2f | %.2f | %.2fx |" % (program.name, imperative_ms, profiling_ms, ratio),
              flush=True)
    print("\n%d of %d programs' profiling calls cost more than %.1fx the imperative call%s"
          % (len(over), len(programs), ALLOWED, (": " + ", ".join(over)) if over else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
