"""tvm_bridge speed: imperative Gluon code under hybridize(dynamic=True, backend="tvm").

Three programs, inference (benchmarks/harness.py: every variant's output checked
against the reference during warm-up, fresh input arrays per call, interleaved
variants, medians):
1. small LSTM: a plain Block looping over gluon.rnn.LSTMCell (hidden 64, batch 1,
   50 steps) - imperative (reference), dynamic on MXNet, dynamic on TVM untuned
   (an empty TVM cache of its own) and tuned (--trials meta-schedule trials), the
   hand-unrolled HybridBlock (static_alloc + static_shape), PyTorch eager and
   torch.compile;
2. MXNet's control-flow configuration: the same loop with LSTMCell hidden 512,
   100 steps, batch 1 and 32 - dynamic on MXNet (reference), on TVM untuned and
   tuned (--config-trials, when given), gluon.rnn.LSTM (the fused oneDNN operator,
   same weights), PyTorch eager, torch.compile (the summary under each table lists the
   matrix products measured for BLAS and what was chosen: tvm_bridge.gemm_choice);
3. LeNet, batch 1 and 64 - MXNet hybridize(static_alloc, static_shape)
   (reference) vs tvm_bridge.compile_block (TVM or MXNet per segment, by measurement).
PyTorch rows appear when torch is installed (`make setup`); PyTorch runs in a
process of its own. "first calls s"
is the wall time of the warm-up calls (profiling, tracing, speed check, TVM
compile and tuning, torch.compile's compile).
"""
import argparse
import contextlib
import os
import tempfile

import mxnet as mx
from mxnet import gluon

import gluon_dyn
import harness
import tvm_bridge
from control_flow_rnn import Loop, cell_values, fused_layer
from small_lstm import BATCH, HIDDEN, INPUT, STEPS, LoopLSTM, UnrolledLSTM, torch_twin
from tvm_bridge.gemm_choice import measured_gemms
from tvm_bridge.runtime import configure_threads


def tvm_options(cache_root, name, trials=None):
    """backend_options with a TVM cache of the variant's own: an untuned variant
    never finds tuning records."""
    options = {"cache_dir": os.path.join(cache_root, name.replace(" ", "_"))}
    if trials:
        options["tune"] = trials
    return options


def table(title, timings, reference):
    ms = {name: timing.median_ms for name, timing in timings.items()}
    harness.print_table(title, ["variant", "ms per call", "speed-up vs %s" % reference,
                                "first calls s"],
                        [[name, ms[name], harness.ratio(ms[reference], ms[name]),
                          sum(timing.warmup_ms) / 1000] for name, timing in timings.items()])
    return ms


def plan_summary(net):
    for plan in gluon_dyn.hybridize.report(net)["tvm"]["plans"]:
        print("plan: runs %s (plan %s ms, one MXNet graph %s ms); segments %s" % (
            plan["runs"], plan["plan_ms"], plan["whole_graph_mxnet_ms"],
            [(s["backend"], s["ops"], s["times_ms"], s["blas_gemms"]) for s in plan["segments"]]))
    for shape, choice in measured_gemms.report().items():
        print("matrix product %s: %s (last medians %s ms)" % (
            shape, choice["chosen"], choice["history"][-1]["times_ms"]))


def small_lstm(args, cache_root):
    mx.random.seed(0)
    names = ["imperative", "dynamic mxnet", "dynamic tvm", "dynamic tvm tuned"]
    nets = {name: LoopLSTM() for name in names}
    nets["hand-unrolled static"] = UnrolledLSTM()
    for net in nets.values():
        net.initialize(mx.init.Xavier())
    harness.copy_params(nets["imperative"], *[net for name, net in nets.items()
                                              if name != "imperative"])
    nets["dynamic mxnet"].hybridize(dynamic=True)
    nets["dynamic tvm"].hybridize(dynamic=True, backend="tvm",
                                  backend_options=tvm_options(cache_root, "dynamic tvm"))
    nets["dynamic tvm tuned"].hybridize(dynamic=True, backend="tvm", backend_options=tvm_options(
        cache_root, "dynamic tvm tuned", args.trials))
    nets["hand-unrolled static"].hybridize(static_alloc=True, static_shape=True)
    variants = [harness.Variant(name, harness.gluon_call(net)) for name, net in nets.items()]
    with contextlib.ExitStack() as workers:
        variants += harness.torch_variants(workers, *torch_twin(nets["imperative"]))
        timings = harness.compare(
            variants, lambda call: (harness.normal_array((STEPS, BATCH, INPUT), call),),
            args.repeats)
    table("small LSTM (hidden %d, batch %d, %d steps), inference" % (HIDDEN, BATCH, STEPS),
          timings, "imperative")
    plan_summary(nets["dynamic tvm"])


def control_flow_config(args, cache_root, batch, hidden=512, steps=100):
    mx.random.seed(0)
    names = ["dynamic mxnet", "dynamic tvm"] + (["dynamic tvm tuned"] if args.config_trials
                                                else [])
    nets = {name: Loop(gluon.rnn.LSTMCell(hidden, input_size=hidden)) for name in names}
    for net in nets.values():
        net.initialize(mx.init.Xavier())
    harness.copy_params(nets["dynamic mxnet"], *[nets[name] for name in names[1:]])
    nets["dynamic mxnet"].hybridize(dynamic=True)
    for name in names[1:]:
        nets[name].hybridize(dynamic=True, backend="tvm", backend_options=tvm_options(
            cache_root, "%s b%d" % (name, batch), args.config_trials if "tuned" in name else None))
    variants = [harness.Variant(name, harness.gluon_call(net), rtol=1e-3, atol=1e-4)
                for name, net in nets.items()]
    cell = nets["dynamic mxnet"].cell
    variants.append(harness.Variant("gluon.rnn.LSTM (fused)",
                                    harness.gluon_call(fused_layer(cell)),
                                    rtol=1e-3, atol=1e-4))
    with contextlib.ExitStack() as workers:
        variants += harness.torch_variants(workers, "build_cell_loop", cell_values(cell),
                                           rtol=1e-3, atol=1e-4)
        timings = harness.compare(
            variants, lambda call: (harness.normal_array((steps, batch, hidden), call),),
            max(3, args.repeats // 10))
    table("LSTM hidden %d, %d steps, batch %d, inference (per-step outputs stacked)"
          % (hidden, steps, batch), timings, "dynamic mxnet")
    plan_summary(nets["dynamic tvm"])


def lenet():
    net = gluon.nn.HybridSequential()
    with net.name_scope():
        net.add(gluon.nn.Conv2D(20, kernel_size=5, in_channels=1, activation="relu"),
                gluon.nn.MaxPool2D(pool_size=2, strides=2),
                gluon.nn.Conv2D(50, kernel_size=5, in_channels=20, activation="relu"),
                gluon.nn.MaxPool2D(pool_size=2, strides=2), gluon.nn.Flatten(),
                gluon.nn.Dense(500, activation="relu", in_units=800), gluon.nn.Dropout(0.5),
                gluon.nn.Dense(10, in_units=500))
    return net


def lenet_speed(args, cache_root, batch):
    mx.random.seed(0)
    reference, net = harness.twins(lenet)
    compiled = tvm_bridge.compile_block(net, harness.normal_array((batch, 1, 28, 28), 0),
                                        cache_dir=os.path.join(cache_root, "lenet"))
    timings = harness.compare(
        [harness.Variant("mxnet hybridized", harness.gluon_call(reference)),
         harness.Variant("compile_block", compiled)],
        lambda call: (harness.normal_array((batch, 1, 28, 28), call),), args.repeats)
    table("LeNet, batch %d, inference" % batch, timings, "mxnet hybridized")
    report = compiled.report()
    print("compile_block plan: runs %s; %s; choices %s" % (
        report["runs"], [(s["backend"], s["ops"], s["times_ms"]) for s in report["segments"]],
        [(entry["call"], entry["why"]) for entry in report["choice"]["history"]]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--trials", type=int, default=64, help="meta-schedule trials (tuned row)")
    parser.add_argument("--config-trials", type=int, default=0,
                        help="meta-schedule trials for a tuned row at hidden 512 (0: none)")
    parser.add_argument("--cache-dir", default=None,
                        help="TVM caches, one per variant (default: a fresh temporary folder)")
    parser.add_argument("--only", choices=("small", "config", "lenet"), default=None)
    args = parser.parse_args()
    print("TVM_NUM_THREADS=%d (tvm_bridge's default: the CPUs available, %d here)"
          % (configure_threads(), len(os.sched_getaffinity(0))))
    with tempfile.TemporaryDirectory(prefix="tvm_bridge_speed_") as fresh:
        cache_root = args.cache_dir or fresh
        if args.only in (None, "small"):
            small_lstm(args, cache_root)
        if args.only in (None, "config"):
            for batch in (1, 32):
                control_flow_config(args, cache_root, batch)
        if args.only in (None, "lenet"):
            for batch in (1, 64):
                lenet_speed(args, cache_root, batch)


if __name__ == "__main__":
    main()
