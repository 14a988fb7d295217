"""What hybridize(dynamic=True) costs a user where no graph serves, and before and after
its speed check settles (issue 26): against the same model run imperatively, per model
and mode (inference; training: forward under autograd.record(), backward, an SGD step).

Variants, interleaved on fresh inputs (benchmarks/harness.py: warm-up with outputs
checked against the imperative run, then medians of timed calls):
- imperative: the model as written, not hybridized;
- hybridize(): Gluon's own (a plain Block's HybridBlock children run as CachedOps);
- dynamic: hybridize(dynamic=True), defaults (speed check on);
- fallback: hybridize(dynamic=True) on a block that gave up before its first call
  (runs as written from then on, as after "runs imperatively: ..." warnings);
- written chosen: hybridize(dynamic=True) on a block whose speed check chose the
  forward as written (as after "runs as written: its graphs measured slower"), no
  measurement due: its calls after the profiled ones run as written;
- profiling: hybridize(dynamic=True, profile_calls=10**9): every call a profiling call
  (the converted code records its tensor predicates).

Columns: each variant's speed against imperative (imperative ms / variant ms: higher is
faster; 1.00x costs nothing), the calls the dynamic block took until its speed check
settled (the first call from which no call measures; segments and all), and how its
calls from the first graph call to then ran against imperative's (median ratio).

Models: d2l's Transformer (the corpus program; its status there is its own: a
fallback or graphs), the Tree-LSTM of the corpus (MXNet's example style), an LSTMCell
of hidden 512 looped in Python (MXNet's control-flow benchmark configuration, fewer
steps), the RNN with a host read of partitioned.py (graph segments), GluonCV's
MobileNetV2 0.25 (a CNN, a HybridBlock), the GAN's discriminator of examples/train
(three small Dense layers: where a call's own bookkeeping shows most).

With --cpu, every variant's calls are timed in CPU time of the calling thread, with
MXNet's NaiveEngine and one OpenMP thread, so that all of a call's work runs in that
thread: what a call costs, whatever other processes run on the machine (a shared
2-core machine swings wall-clock ratios by 2x), but not what the engine overlaps.

    .venv/bin/python benchmarks/dynamic_overheads.py [--repeats 10] [--models a,b] [--cpu]
"""
import argparse
import os
import statistics
import sys
import time
import warnings

if "--cpu" in sys.argv:     # before MXNet loads
    os.environ.update(MXNET_ENGINE_TYPE="NaiveEngine", MXNET_OMP_MAX_THREADS="1")

import harness  # noqa: E402  (first: sets MXNet's threads)

import mxnet as mx
from mxnet import gluon

import gluon_dyn
from gluon_dyn.hybridize.call.dynamic import runner_of
from partitioned import BATCH, FEATURES, STEPS, ReadingRNN

sys.path.insert(0, os.path.join(harness.REPO, "tests"))
import corpus  # noqa: E402
from corpus.program import SEED, Program  # noqa: E402
from corpus_report import batch_inputs, inference_run, training_run  # noqa: E402
from dynamic_twins import copy_parameters, twins  # noqa: E402

sys.path.insert(0, os.path.join(harness.REPO, "examples", "train"))
import gan  # noqa: E402

LSTM_HIDDEN, LSTM_STEPS = 512, 50
GAN_HIDDEN, GAN_BATCH = 128, 128     # examples/train/gan.py's defaults
RTOL, ATOL = 1e-3, 1e-4     # a hidden-512 LSTM's outputs agree to this across variants
VARIANTS = ("imperative", "hybridize()", "dynamic", "fallback", "written chosen", "profiling")


class Loop(gluon.Block):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = gluon.rnn.LSTMCell(LSTM_HIDDEN, input_size=LSTM_HIDDEN)

    def forward(self, seq):
        states = self.cell.begin_state(batch_size=seq.shape[1])
        outputs = []
        for t in range(seq.shape[0]):
            out, states = self.cell(seq[t], states)
            outputs.append(out)
        return mx.nd.stack(*outputs)


def plain_program(name, make, shape, **options):
    def build():
        block = make()
        block.initialize(mx.init.Xavier())
        return block
    def optimizer(model):
        # The host read chooses one of two layers: the other's gradient is stale.
        trainer = gluon.Trainer(model.collect_params(), "sgd", {"learning_rate": 0.001})
        return lambda: trainer.step(1, ignore_stale_grad=True)
    return Program(name=name, package="written here", covers=name, build=build,
                   inputs=lambda call: (harness.normal_array(shape, call),),
                   batch=lambda step: (harness.normal_array(shape, 100 + step),),
                   loss=lambda model, x: model(x).sum(), optimizer=optimizer, **options)


def models():
    return {"d2l transformer": corpus.named("d2l_transformer"),
            "tree-lstm": corpus.named("tree_lstm_similarity"),
            "lstm h512": plain_program("lstm h512", Loop, (LSTM_STEPS, 1, LSTM_HIDDEN)),
            "rnn with a host read": plain_program("rnn with a host read", ReadingRNN,
                                                  (2 * STEPS, BATCH, FEATURES)),
            "mobilenetv2_0.25": corpus.named("gluoncv_mobilenetv2_0.25"),
            # Each step from the initial values: descending on the sum of its
            # unbounded scores, the weights grow to overflow within 20 steps.
            "gan discriminator": plain_program("gan discriminator",
                                               lambda: gan.Discriminator(GAN_HIDDEN),
                                               (GAN_BATCH, 64),
                                               steps_from_initial_parameters=True)}


def measuring_runners(report):
    """Whether a runner's speed check measures still (its graph segments' included): a
    runner that fell back, or whose last call ran otherwise (profiling, a trace, the
    recursion engine), measures nothing."""
    segments = (report.get("graph_segments") or {}).get("segments") or []
    return (report["fallback"] is None and report["calls"]["last"] in ("graph", "speed_check")
            and report["speed_check"]["state"].startswith("measuring")) or any(
        measuring_runners(segment) for segment in segments)


def measuring(block):
    return measuring_runners(gluon_dyn.hybridize.report(block))


def blocks(program):
    """{variant: block}: the same parameters in each."""
    imperative, dynamic = twins(program.make, seed=SEED, initialized=True)
    made = {"imperative": imperative, "dynamic": dynamic}
    for name in VARIANTS[1:]:
        if name != "dynamic":
            made[name] = program.make()
            copy_parameters(imperative, made[name])
    made["hybridize()"].hybridize()
    made["fallback"].hybridize(dynamic=True)
    runner_of(made["fallback"])._give_up("benchmarked as a block that fell back")  # noqa: SLF001
    made["written chosen"].hybridize(dynamic=True)
    written_chosen = runner_of(made["written chosen"])
    check = written_chosen.speed_check
    check.measuring, check.choice.chosen, written_chosen.warned_slower = False, "python", True
    made["profiling"].hybridize(dynamic=True, profile_calls=10 ** 9)
    return made


def row(name, program, mode, repeats):
    make_run, make_inputs = (inference_run, program.inputs) if mode == "inference" else \
        (training_run, batch_inputs(program))
    with program.scope(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        made = blocks(program)
        states = []     # per dynamic call: whether its speed check still measured after it
        dynamic_run = make_run(program, made["dynamic"])

        def dynamic(*arguments):
            result = dynamic_run(*arguments)
            states.append(measuring(made["dynamic"]))
            return result
        dynamic.measuring = lambda: measuring(made["dynamic"])
        variants = [harness.Variant(variant, dynamic if variant == "dynamic" else
                                    make_run(program, made[variant]), rtol=RTOL, atol=ATOL,
                                    self_timed=True)
                    for variant in VARIANTS]
        timings = harness.compare(variants, make_inputs, repeats)
        report = gluon_dyn.hybridize.report(made["dynamic"])
    settled = max([call + 1 for call, still in enumerate(states) if still], default=0)
    first_graph = 4     # 3 profiling calls, then the call that traces
    during = [imperative / dyn for imperative, dyn in zip(
        timings["imperative"].warmup_ms[first_graph:settled],
        timings["dynamic"].warmup_ms[first_graph:settled])]
    ms = {variant: timing.median_ms for variant, timing in timings.items()}
    how = "fallback: " + report["fallback"] if report["fallback"] else \
        "%d%% of calls after profiling on graphs" % round(
            100 * (report["calls"]["graph_share_after_profiling"] or 0))
    return [name, mode, ms["imperative"]] + [harness.ratio(ms["imperative"], ms[variant])
                                             for variant in VARIANTS[1:]] + [
        settled, "%.2fx" % statistics.median(during) if during else "-", how[:90]]


def cpu_timed_ms(run):
    """harness.timed_ms in CPU time of this thread (all of the call's work, under
    NaiveEngine and one OpenMP thread)."""
    start = time.thread_time()
    result = run()
    mx.nd.waitall()
    return result, (time.thread_time() - start) * 1000


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--cpu", action="store_true", help="time in CPU time (see above)")
    parser.add_argument("--models", help="comma-separated, of: " + ", ".join(models()))
    parser.add_argument("--modes", default="inference,training")
    args = parser.parse_args()
    if args.cpu:
        harness.timed_ms = cpu_timed_ms
    chosen = models()
    if args.models:
        chosen = {name: chosen[name] for name in args.models.split(",")}
    rows = []
    for name, program in chosen.items():
        for mode in args.modes.split(","):
            rows.append(row(name, program, mode, args.repeats))
            print(rows[-1], flush=True)
    harness.print_table(
        "hybridize(dynamic=True)'s costs against imperative (imperative ms / variant ms%s)"
        % (", CPU time" if args.cpu else ""),
        ["model", "mode", "imperative ms"] + list(VARIANTS[1:]) +
        ["calls to settle", "until settled", "dynamic block"], rows)


if __name__ == "__main__":
    main()
