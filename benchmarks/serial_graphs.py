"""Small graphs on one OpenMP thread (gluon_dyn/threads.py): what it gains where
every array is small, and what a wide team gains where arrays are larger.

1. The corpus's child-sum Tree-LSTM (tests/corpus/older_styles.py), inference on
   new trees, timed as `make corpus` times it (corpus_report.inference_run: the
   random generators seeded before each call, as the corpus seeds them):
   imperative, and hybridize(dynamic=True) with the recursion engine's small
   groups on one thread (the default) or on the engine's whole team
   (threads.SMALL_ARRAY = 0 while its calls choose), interleaved (harness.py).
2. The same dynamic calls right after a call of their own and right after an
   imperative call of the model: the imperative operators wake the engine's
   OpenMP team, whose second thread then spins (libgomp's default wait policy,
   a few milliseconds) on the core the dynamic call's Python and engine threads
   need; interleaved with imperative, as make corpus and make report time, half
   the dynamic calls pay for it.
3. One graph (split, concat, take, add_n and sum over a (rows, hidden) array) run
   in a region of one thread and without, per size: where the wide team starts to
   pay for its wake-ups (the choice of threads.SMALL_ARRAY).

It compares an operator team of several threads with one: where MXNet's default gives
one thread (half the CPUs: a 2-vCPU machine), run it with MXNET_OMP_MAX_THREADS set to the
cores, as the measurements in gluon_dyn/threads.py were.

    MXNET_OMP_MAX_THREADS=2 .venv/bin/python benchmarks/serial_graphs.py [--repeats 30]
"""
import argparse
import os
import sys
import warnings

import harness

import mxnet as mx

sys.path.insert(0, os.path.join(harness.REPO, "tests"))
import corpus  # noqa: E402
from corpus.program import SEED  # noqa: E402
from corpus_report import inference_run  # noqa: E402
from dynamic_twins import copy_parameters, twins  # noqa: E402

from gluon_dyn import threads  # noqa: E402

SIZES = [(8, 12), (8, 48), (8, 128), (8, 512), (64, 512)]


def with_small_array(elements, run):
    """`run` whose graphs choose with threads.SMALL_ARRAY = `elements` (each graph
    chooses once per input shapes, so a block keeps the choices of its variant)."""
    def chosen(*arguments):
        kept, threads.SMALL_ARRAY = threads.SMALL_ARRAY, elements
        try:
            return run(*arguments)
        finally:
            threads.SMALL_ARRAY = kept
    return chosen


def tree_lstm_rows(repeats):
    program = corpus.named("tree_lstm_similarity")
    with program.scope(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        imperative, one_thread = twins(program.make, seed=SEED, initialized=True)
        wide = program.make()
        copy_parameters(imperative, wide)
        wide.hybridize(dynamic=True)
        variants = [
            harness.Variant("imperative", inference_run(program, imperative), self_timed=True),
            harness.Variant("one thread", with_small_array(
                threads.SMALL_ARRAY, inference_run(program, one_thread)), self_timed=True),
            harness.Variant("wide team", with_small_array(0, inference_run(program, wide)),
                            self_timed=True)]
        timings = harness.compare(variants, program.inputs, repeats)
    ms = {name: timing.median_ms for name, timing in timings.items()}
    return [["Tree-LSTM inference, new trees", "%.2f" % ms["imperative"]] + [
        "%.2f (%s)" % (ms[name], harness.ratio(ms["imperative"], ms[name]))
        for name in ("one thread", "wide team")]]


def after_rows(repeats):
    program = corpus.named("tree_lstm_similarity")
    with program.scope(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        imperative, dynamic = twins(program.make, seed=SEED, initialized=True)
        run_imperative, run_dynamic = (inference_run(program, model)
                                       for model in (imperative, dynamic))

        def after(previous):
            def run(*arguments):
                previous(*arguments)      # untimed
                return run_dynamic(*arguments)
            return run
        variants = [harness.Variant("after its own call", after(run_dynamic), self_timed=True),
                    harness.Variant("after an imperative call", after(run_imperative),
                                    self_timed=True)]
        timings = harness.compare(variants, program.inputs, repeats)
    own, imperative_first = (timings[name].median_ms
                             for name in ("after its own call", "after an imperative call"))
    return [["Tree-LSTM inference, new trees", "%.2f" % own, "%.2f" % imperative_first,
             harness.ratio(imperative_first, own)]]


def graph_of(rows, hidden):
    data, index = mx.sym.var("data"), mx.sym.var("index")
    parts = mx.sym.split(data, num_outputs=4, axis=1)
    return mx.sym.Group([mx.sym.concat(parts[0], parts[2], parts[3], dim=1),
                         mx.sym.take(data, index), mx.sym.sum(data, axis=1),
                         mx.sym.add_n(parts[0], parts[1], parts[2])])


def graph_rows(repeats):
    rows = []
    for shape in SIZES:
        op = mx.nd.CachedOp(graph_of(*shape), flags=[("static_alloc", True),
                                                      ("static_shape", True)])

        def run(one_thread):
            def call(data, index):
                return threads.run_graph(lambda: list(op(data, index)), one_thread, [data])
            return call
        variants = [harness.Variant("wide team", run(False)),
                    harness.Variant("one thread", run(True))]
        timings = harness.compare(variants, lambda call, shape=shape: (
            harness.normal_array(shape, call), mx.nd.zeros((shape[0],))), repeats)
        wide, one = (timings[name].median_ms for name in ("wide team", "one thread"))
        rows.append(["%d x %d" % shape, shape[0] * shape[1], "%.3f" % wide, "%.3f" % one,
                     harness.ratio(wide, one)])
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    if not threads.serial_graphs_available():
        sys.exit("MXNet's engine here runs a context's operators on several threads: "
                 "no graph runs on one thread (gluon_dyn/threads.py)")
    harness.print_table("The corpus's Tree-LSTM: small graphs on one thread or the wide team "
                        "(imperative ms / variant ms)",
                        ["program", "imperative ms", "one thread ms", "wide team ms"],
                        tree_lstm_rows(args.repeats))
    harness.print_table("The dynamic Tree-LSTM after its own call or an imperative one (ms; "
                        "the second over the first: the cost of the team's spinning thread)",
                        ["program", "after its own call ms", "after an imperative call ms",
                         "slower by"], after_rows(args.repeats))
    harness.print_table("One graph of split, concat, take, add_n and sum, per size (ms; "
                        "wide team ms / one thread ms: above 1, one thread is faster)",
                        ["array", "elements", "wide team ms", "one thread ms", "one thread"],
                        graph_rows(args.repeats))


if __name__ == "__main__":
    main()
