"""`make fuzz FUZZ_MINUTES=N`: generated programs, imperative vs dynamic, for N minutes.

The seed is random unless FUZZ_SEED gives it; it is printed first, so that a run
can be repeated (FUZZ_SEED=S: the same programs in the same order) even when it
does not finish. A quarter of the programs are of the graph-break family
(programs.generate(breaks=True): host reads and data-dependent masks in the
middle of graph code), and a quarter run in float64 (programs.FLOAT64_SHARE; the
summary counts them apart). A share of the programs (STEPS_SHARE), keeping no state on
their block, run their calls as training steps of three calls and a loss on each
result, batched (batch_calls=True: differential.STEP_OPTIONS). A share of the
cases (RECURSION_SHARE) are streams of new trees through the recursion engine
(fuzzing/recursion_streams.py), counted apart; a stream that disagrees is written
to fuzz-failures/ with its seed.

Ends with one line: "fuzz: seed S, N programs checked in X minutes, P% of programs
and M% of calls after profiling on graphs, K disagreed; R recursion streams (...),
D disagreed" (P: programs whose last
call ran on a graph; M: of all calls after the profiled ones, those a graph
served; every program counts, those that must fall back included). Every
disagreement (an internal error stopping a trace included) is shrunk to a minimal
program (for at most SHRINK_SECONDS past the run's end) and written, as Python
source headed by the problem and the calls, to fuzz-failures/.
Exits non-zero if any program disagreed.
"""
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fuzzing import differential, programs, recursion_streams  # noqa: E402

BREAKS_SHARE = 0.25
STEPS_SHARE = 0.25
RECURSION_SHARE = 0.15
# Shrinking a disagreement may run past the run's end by this much, no more: one
# broken change can make every program disagree.
SHRINK_SECONDS = 60


def main():
    minutes = float(os.environ.get("FUZZ_MINUTES", "1"))
    seed = int(os.environ.get("FUZZ_SEED", random.randrange(10 ** 9)))
    out_dir = os.environ.get("FUZZ_OUT", "fuzz-failures")
    rng = random.Random(seed)
    print("fuzz: seed %d (FUZZ_SEED=%d repeats this run), %s minutes"
          % (seed, seed, minutes), flush=True)
    start = time.time()
    end = start + 60 * minutes
    coverage, streams = differential.Coverage(), recursion_streams.StreamCoverage()
    while time.time() < end:
        if rng.random() < RECURSION_SHARE:
            _check_stream(rng.randrange(10 ** 9), streams, out_dir)
            continue
        program_seed, call_seed = differential.random_case(rng)
        breaks = rng.random() < BREAKS_SHARE
        steps = rng.random() < STEPS_SHARE
        # A step's calls are deferred only where they keep no state on the block.
        program = programs.generate(program_seed, breaks, state=not steps)
        outcome = differential.check(program, call_seed, steps=steps)
        coverage.add(outcome)
        if outcome.problem:
            smallest = differential.shrink(program, call_seed, steps=steps,
                                           until=max(end, time.time() + SHRINK_SECONDS))
            os.makedirs(out_dir, exist_ok=True)
            kind = ("_breaks" if breaks else "") + ("_steps" if steps else "")
            path = os.path.join(out_dir, "program_%d_%d%s.py" % (program_seed, call_seed, kind))
            with open(path, "w") as f:
                f.write(differential.failure_file(
                    differential.disagreement(smallest, call_seed, steps),
                    programs.render(smallest), differential.calls_for(call_seed, steps=steps)))
            print("DISAGREEMENT (program seed %d%s, call seed %d): %s -> %s"
                  % (program_seed, kind.replace("_", " "), call_seed, outcome.problem, path),
                  flush=True)
    print("fuzz: seed %d, %d programs checked in %.1f minutes, %s; %s"
          % (seed, coverage.programs, (time.time() - start) / 60, coverage.summary(),
             streams.summary()))
    return 1 if coverage.disagreed or streams.disagreed else 0


def _check_stream(stream_seed, streams, out_dir):
    outcome = recursion_streams.check(stream_seed)
    streams.add(outcome)
    if outcome.problem:
        os.makedirs(out_dir, exist_ok=True)
        path = os.path.join(out_dir, "recursion_stream_%d.txt" % stream_seed)
        with open(path, "w") as f:
            f.write("recursion_streams.check(%d): %s%s\n%s\n" % (
                stream_seed, outcome.model, " (group by group only)" if outcome.groups_only
                else "", outcome.problem))
        print("DISAGREEMENT (recursion stream %d, %s): %s -> %s"
              % (stream_seed, outcome.model, outcome.problem.splitlines()[0], path), flush=True)


if __name__ == "__main__":
    sys.exit(main())
