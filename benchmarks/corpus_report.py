"""`make corpus`: the corpus of real programs (tests/corpus) imperative vs
hybridize(dynamic=True), one row per program: correct, share of calls on graphs,
graph breaks, speed against imperative for inference and training (harness.py:
interleaved calls on fresh inputs, 20 warm-up calls, medians), the slowest of the
first calls (tracing included), peak memory against imperative (each in a process
of its own), and why calls ran as Python. Each program's row is measured in a
process of its own: a row must not depend on the programs measured before it (after
the rest of the corpus had run in the same process, the same calls were 10-25%
slower, dynamic and imperative alike). A program that raises or differs gets
a row saying so (not correct, or speed not timed and why), and the report goes on.
Writes docs/corpus.md and docs/corpus.json with the floors of issue 26 that the run
misses (tests/corpus/floors.py).

    .venv/bin/python benchmarks/corpus_report.py [PROGRAM ...]
    .venv/bin/python benchmarks/corpus_report.py --row PROGRAM
    .venv/bin/python benchmarks/corpus_report.py --memory PROGRAM imperative|dynamic
"""
import argparse
import json
import os
import re
import subprocess
import sys
import warnings

import harness  # noqa: F401  (first: sets MXNet's threads, runs this again if needed)

import mxnet as mx
from mxnet import autograd

sys.path.insert(0, os.path.join(harness.REPO, "tests"))
import corpus  # noqa: E402
from corpus.compare import Wrong, run_twins  # noqa: E402
from corpus.floors import misses  # noqa: E402
from corpus.program import SEED, seeded  # noqa: E402
from dynamic_twins import seeded_block, twins  # noqa: E402

from gluon_dyn.hybridize.timing import speed_check  # noqa: E402

WARMUP, REPEATS = 20, 10
TIMED_BUDGET_S = 3.0   # per program and kind: timed calls past REPEATS while they fit
MEMORY_RUNS = 2     # processes per mode whose peak memory is measured
DOCS = os.path.join(harness.REPO, "docs")


def figures_of(program):
    """(correct, Figures or None, what differed): the corpus test's run (graphs kept
    even where slower, as the tests keep them)."""
    enabled, speed_check.ENABLED_BY_DEFAULT = speed_check.ENABLED_BY_DEFAULT, False
    try:
        return True, run_twins(program)[2], ""
    except Wrong as wrong:
        return False, None, str(wrong).splitlines()[0]
    except Exception as error:  # noqa: BLE001 - a call raised: the program's row says what
        return False, None, "%s raised %s: %s" % (program.name, type(error).__name__,
                                                   _first_line(error))
    finally:
        speed_check.ENABLED_BY_DEFAULT = enabled


def inference_run(program, model):
    def call(*arguments):
        with autograd.pause():
            return program.call(model, *arguments)
    return _timed_after_seeding(call)


def training_run(program, model):
    update = program.updater(model)
    params = model.collect_params()
    initial = ({name: param.data().copy() for name, param in params.items()}
               if program.steps_from_initial_parameters else {})

    def step(*batch):
        with autograd.record():
            loss = program.loss(model, *batch)
        loss.backward()
        update()
        return loss

    def restore():
        for name, value in initial.items():
            params[name].set_data(value)
    return _timed_after_seeding(step, restore)


def _timed_after_seeding(call, prepare=None):
    """A self-timed run (harness.Variant) of `call`: the random generators
    seeded (random operators, samplers, draw alike in both variants) and
    `prepare()` done before the timed region. Seeding MXNet reseeds every
    random resource, about 1.2 ms of engine work, which a call right after it
    waits for: inside the region it would add that to both variants."""
    def run(*arguments):
        if prepare is not None:
            prepare()
        seeded(SEED)
        mx.nd.waitall()
        return harness.timed_ms(lambda: call(*arguments))
    return run


def batch_inputs(program):
    def make(step):
        seeded(SEED + step)
        return program.batch(step)
    return make


def speeds(program):
    """{"inference", "training"}: dynamic's speed against imperative (None where the
    program has no such calls or they could not be timed), the slowest warm-up call
    of the dynamic model (s), and {kind: why it could not be timed} (outputs that
    differed, or what a call raised): one program's failure is its row's, not the
    report's."""
    result, first, unmeasured = {}, 0.0, {}
    kinds = [("inference", inference_run, program.inputs)]
    if program.loss is not None:
        kinds.append(("training", training_run, batch_inputs(program)))
    for kind, make_run, make_inputs in kinds:
        with program.scope(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            imperative, dynamic = twins(program.make, seed=SEED, initialized=True,
                                        methods=program.methods)
            variants = [harness.Variant("imperative", make_run(program, imperative),
                                        self_timed=True),
                        harness.Variant("dynamic", make_run(program, dynamic), self_timed=True)]
            try:
                timings = harness.compare(variants, make_inputs, REPEATS, warmup=WARMUP,
                                           budget_ms=1000 * TIMED_BUDGET_S)
            except Exception as error:  # noqa: BLE001 - recorded in the program's row
                why = "%s: %s" % (type(error).__name__, _first_line(error))
                print("%s %s not timed: %s" % (program.name, kind, why), file=sys.stderr)
                result[kind], unmeasured[kind] = None, why
                continue
        result[kind] = timings["imperative"].median_ms / timings["dynamic"].median_ms
        first = max(first, max(timings["dynamic"].warmup_ms) / 1000.0)
    return result, first, unmeasured


def _first_line(error):
    """The line of an error that says what failed (MXNet's errors end with it)."""
    lines = [line for line in str(error).splitlines() if line.strip()]
    if isinstance(error, mx.base.MXNetError) and lines:
        return lines[-1]
    return lines[0] if lines else ""


def _status_kb(field):
    """A memory figure (KB) of this process from Linux's /proc/self/status."""
    with open("/proc/self/status") as f:
        return int(re.search(r"^%s:\s+(\d+)" % field, f.read(), re.M).group(1))


def _forget_peak():
    """Reset the process's peak resident memory (VmHWM) to what it holds now: the
    peak of building the model is not the calls' doing."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def peak_memory_kb(name, mode):
    """Run in its own process: the process's peak resident memory (KB) while the
    program's calls run, as written or dynamic, counted from once its model was built.
    The whole process, as a user sizes a machine: what the calls alone add can be a
    few KB as written (a decoder over short sequences), and any ratio to it noise."""
    program = corpus.named(name)
    with program.scope(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # One model in the process: a twin dropped would leave its freed memory to
        # chance (the allocator may or may not give it back to the system).
        model = seeded_block(program.make, seed=SEED, initialized=True)
        if mode == "dynamic":
            model.hybridize(dynamic=True, methods=program.methods)
        mx.nd.waitall()
        _forget_peak()
        run = inference_run(program, model)
        for call in range(WARMUP):
            harness.as_numpy(run(*program.inputs(call))[0])
        if program.loss is not None:
            train, make = training_run(program, model), batch_inputs(program)
            for step in range(5):
                harness.as_numpy(train(*make(step))[0])
        mx.nd.waitall()
    return _status_kb("VmHWM")


def memory_ratio(name):
    """Dynamic's peak memory over imperative's, each the smaller of MEMORY_RUNS
    processes (alternating): how much freed memory the allocator keeps is chance,
    which only adds (the same imperative run measured 568 and 583 MB)."""
    used = {}
    for _ in range(MEMORY_RUNS):
        for mode in ("imperative", "dynamic"):
            done = subprocess.run([sys.executable, os.path.abspath(__file__), "--memory", name,
                                   mode], capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print("%s %s memory run failed:\n%s" % (name, mode, done.stderr[-2000:]),
                      file=sys.stderr)
                return None
            peak = int(done.stdout.split()[-1])
            used[mode] = min(used.get(mode, peak), peak)
    return used["dynamic"] / used["imperative"]


def row(program):
    correct, figures, wrong = figures_of(program)
    measured, first, unmeasured = speeds(program)
    return {"name": program.name, "package": program.package, "covers": program.covers,
            "correct": correct, "wrong": wrong,
            "share_on_graphs": figures.share if figures else None,
            "status": figures.status if figures else "wrong",
            "graph_breaks": len(figures.graph_breaks) if figures else None,
            "graphs": figures.graphs if figures else None,
            "speed": measured, "first_call_s": first, "not_timed": unmeasured,
            "peak_memory": memory_ratio(program.name),
            "cause": (figures.cause() if figures else wrong)}


def row_in_own_process(program):
    """row(program), measured by a process of its own (`--row`); a process that
    fails gives a row saying how."""
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--row", program.name],
                          stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode == 0:
        return json.loads(done.stdout.splitlines()[-1])
    why = "its process exited with status %d" % done.returncode
    return {"name": program.name, "package": program.package, "covers": program.covers,
            "correct": False, "wrong": why, "share_on_graphs": None, "status": "wrong",
            "graph_breaks": None, "graphs": None, "speed": {}, "first_call_s": None,
            "not_timed": {}, "peak_memory": None, "cause": why}


def times(value):
    return "-" if value is None else "%.2fx" % value


def markdown(rows):
    lines = ["# The corpus of real programs", "",
             "Written by `make corpus` (`%s`). Each program runs as written and through "
             "`hybridize(dynamic=True)`, in a process of its own; *share on graphs*: calls "
             "after profiling served by graphs (calls through methods other than forward, "
             "hybridized with `methods=`, "
             "count as the forward's); "
             "speed: medians of %d to %d interleaved calls on fresh inputs, each right after an "
             "untimed call of its own variant (as many as fit in "
             "%.0f s) after %d warm-up calls "
             "(dynamic against imperative, higher is faster); *first calls*: the slowest of "
             "the dynamic model's warm-up calls, its traces included; peak memory: the "
             "process's peak resident memory while the calls run (from once the model is "
             "built), dynamic against imperative, each in a process of its own holding "
             "only that model, the smaller of %d such processes."
             % (harness.command_line(), REPEATS, harness.MAX_REPEATS_FACTOR * REPEATS,
                TIMED_BUDGET_S, WARMUP, MEMORY_RUNS), "",
             "| program | package | correct | share on graphs | graph breaks | inference | "
             "training | first calls (s) | peak memory | why not on graphs |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        share = "-" if r["share_on_graphs"] is None else "%.0f%%" % (100 * r["share_on_graphs"])
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["name"], r["package"], "yes" if r["correct"] else "**no**", share,
            "-" if r["graph_breaks"] is None else r["graph_breaks"],
            times(r["speed"].get("inference")), times(r["speed"].get("training")),
            "-" if r["first_call_s"] is None else "%.1f" % r["first_call_s"],
            times(r["peak_memory"]),
            r["cause"].replace("|", "\\|")[:300]))
    missed = misses(rows)
    lines += ["", "Floors missed: %d." % len(missed), ""] + ["- " + miss for miss in missed]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("programs", nargs="*", help="names of corpus programs (default: all)")
    parser.add_argument("--row", metavar="PROGRAM", help=argparse.SUPPRESS)
    parser.add_argument("--memory", nargs=2, metavar=("PROGRAM", "MODE"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory:
        print(peak_memory_kb(*args.memory))
        return
    if args.row:
        print(json.dumps(row(corpus.named(args.row))))
        return
    chosen = [corpus.named(name) for name in args.programs] or corpus.programs()
    rows = []
    for program in chosen:
        rows.append(row_in_own_process(program))
        print(json.dumps(rows[-1]), flush=True)
    text = markdown(rows)
    print(text)
    if not args.programs:   # the docs hold whole-corpus runs only
        with open(os.path.join(DOCS, "corpus.md"), "w") as file:
            file.write(text)
        with open(os.path.join(DOCS, "corpus.json"), "w") as file:
            json.dump({"command": harness.command_line(), "programs": rows,
                       "floors_missed": misses(rows)}, file, indent=1)
            file.write("\n")


if __name__ == "__main__":
    main()
