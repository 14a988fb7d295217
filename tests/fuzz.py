"""`make fuzz FUZZ_MINUTES=N`: generated programs, imperative vs dynamic, for N minutes.

Ends with one line: "fuzz: seed S, N programs checked in X minutes, P% of programs
and M% of calls after profiling on graphs, K disagreed" (P: programs whose last
call ran on a graph; M: of all calls after the profiled ones, those a graph
served; every program counts, those that must fall back included). Every
disagreement (an internal error stopping a trace included) is shrunk to a minimal
program and written, as Python source with the failing calls, to fuzz-failures/.
Exits non-zero if any program disagreed.
"""
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fuzzing import differential, programs  # noqa: E402


def main():
    minutes = float(os.environ.get("FUZZ_MINUTES", "1"))
    seed = int(os.environ.get("FUZZ_SEED", random.randrange(10 ** 9)))
    out_dir = os.environ.get("FUZZ_OUT", "fuzz-failures")
    rng = random.Random(seed)
    start = time.time()
    coverage = differential.Coverage()
    while time.time() < start + 60 * minutes:
        program_seed, call_seed = differential.random_case(rng)
        program = programs.generate(program_seed)
        outcome = differential.check(program, call_seed)
        coverage.add(outcome)
        if outcome.problem:
            smallest = differential.shrink(program, call_seed)
            os.makedirs(out_dir, exist_ok=True)
            path = os.path.join(out_dir, "program_%d_%d.py" % (program_seed, call_seed))
            with open(path, "w") as f:
                header = "%s\ncalls: %s" % (differential.disagreement(smallest, call_seed),
                                            differential.calls_for(call_seed))
                f.write("".join("# %s\n" % line for line in header.splitlines()))
                f.write(programs.render(smallest))
            print("DISAGREEMENT (program seed %d, call seed %d): %s -> %s"
                  % (program_seed, call_seed, outcome.problem, path), flush=True)
    print("fuzz: seed %d, %d programs checked in %.1f minutes, %s"
          % (seed, coverage.programs, (time.time() - start) / 60, coverage.summary()))
    return 1 if coverage.disagreed else 0


if __name__ == "__main__":
    sys.exit(main())
