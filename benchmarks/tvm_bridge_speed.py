"""tvm_bridge speed: imperative Gluon code under hybridize(dynamic=True, backend="tvm").

Three programs, inference, variants interleaved in one run (medians of many
repeats after warm-up; every variant is checked against the imperative output):
1. small LSTM: a plain Block looping over gluon.rnn.LSTMCell (hidden 64, batch 1,
   50 steps) - imperative, dynamic on MXNet, dynamic on TVM (untuned, and tuned
   with --trials meta-schedule trials), the hand-unrolled HybridBlock
   (static_alloc + static_shape), PyTorch eager and torch.compile;
2. MXNet's control-flow configuration: the same loop with LSTMCell hidden 512,
   100 steps, batch 1 and 32 - dynamic on MXNet and on TVM (untuned, and tuned
   with --config-trials trials when given), gluon.rnn.LSTM (the fused oneDNN
   operator), PyTorch eager, torch.compile;
3. LeNet, batch 1 and 64 - MXNet hybridize(static_alloc) vs
   tvm_bridge.compile_block (TVM or MXNet per segment, by measurement).
PyTorch columns appear when torch is installed (`make bench-extra`). Compile
times (first call of each variant, tuning included) are printed too.
"""
import argparse
import os
import statistics
import sys
import time

import mxnet as mx
import numpy as np
from mxnet import gluon

import gluon_dyn  # noqa: F401  (enables hybridize(dynamic=True))
import tvm_bridge
from tvm_bridge.runtime import configure_threads

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from control_flow_rnn import Loop  # noqa: E402
from small_lstm import LoopLSTM, UnrolledLSTM  # noqa: E402

try:
    import torch
except ImportError:
    torch = None


def same_params(source, *targets):
    for target in targets:
        for (_, src), (_, dst) in zip(sorted(source.collect_params().items()),
                                      sorted(target.collect_params().items())):
            dst.set_data(src.data())


def timed_first_call(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def interleaved(variants, repeats):
    """Median ms per call of each zero-argument callable, called in turn."""
    times = {name: [] for name in variants}
    for _ in range(repeats):
        for name, run in variants.items():
            start = time.perf_counter()
            run()
            times[name].append((time.perf_counter() - start) * 1000)
    return {name: statistics.median(values) for name, values in times.items()}


def mx_runner(net, *args):
    def run():
        out = net(*args)
        (out[0] if isinstance(out, (list, tuple)) else out).wait_to_read()
        return out
    return run


def warm_dynamic(net, run, calls=8):
    """Profiled calls, the trace, the speed check and (TVM) the plan's compile."""
    start = time.perf_counter()
    for _ in range(calls):
        run()
    return time.perf_counter() - start


class TorchLSTMLoop:
    """The loop over torch.nn.LSTMCell (context only; never a dependency)."""

    def __init__(self, hidden, with_head):
        self.cell = torch.nn.LSTMCell(hidden, hidden)
        self.head = torch.nn.Linear(hidden, 1) if with_head else None
        self.hidden = hidden

    def __call__(self, seq):
        h = (torch.zeros(seq.shape[1], self.hidden), torch.zeros(seq.shape[1], self.hidden))
        for t in range(seq.shape[0]):
            h = self.cell(seq[t], h)
        return self.head(h[0]) if self.head is not None else h[0]


def torch_variants(make_net, seq):
    """PyTorch eager and torch.compile on the same program, when torch is here."""
    if torch is None:
        return {}, {}
    torch.set_num_threads(2)
    net, data = make_net(), torch.from_numpy(seq.asnumpy())
    compiled = torch.compile(net.__call__)

    def eager():
        with torch.no_grad():
            net(data)

    def compiled_run():
        with torch.no_grad():
            compiled(data)
    _, compile_s = timed_first_call(compiled_run)
    return {"pytorch eager": eager, "torch.compile": compiled_run}, {"torch.compile": compile_s}


def print_table(title, medians, compile_s, reference):
    print("\n%s" % title)
    print("| variant | ms per call | speed-up vs %s | first calls / compile s |" % reference)
    print("|---|---|---|---|")
    for name, ms in medians.items():
        print("| %s | %.3f | %.2fx | %s |" % (name, ms, medians[reference] / ms,
                                             "%.1f" % compile_s[name] if name in compile_s else ""))


def check_close(reference, *others):
    expected = reference().asnumpy()
    for run in others:
        np.testing.assert_allclose(run().asnumpy(), expected, rtol=1e-4, atol=1e-5)


def small_lstm(args, cache_dir):
    seq = mx.nd.random.normal(shape=(50, 1, 64))
    nets = {name: LoopLSTM() for name in ("imperative", "dynamic mxnet", "dynamic tvm",
                                          "dynamic tvm tuned")}
    nets["hand-unrolled static"] = UnrolledLSTM()
    for net in nets.values():
        net.initialize(mx.init.Xavier())
    same_params(nets["imperative"], *[n for name, n in nets.items() if name != "imperative"])
    nets["dynamic mxnet"].hybridize(dynamic=True)
    nets["dynamic tvm"].hybridize(dynamic=True, backend="tvm",
                                  backend_options={"cache_dir": cache_dir})
    nets["dynamic tvm tuned"].hybridize(dynamic=True, backend="tvm", backend_options={
        "cache_dir": cache_dir, "tune": args.trials})
    nets["hand-unrolled static"].hybridize(static_alloc=True, static_shape=True)
    runs = {name: mx_runner(net, seq) for name, net in nets.items()}
    compile_s = {name: warm_dynamic(net, runs[name]) for name, net in nets.items()
                 if name.startswith("dynamic")}
    check_close(runs["imperative"], *[run for name, run in runs.items() if name != "imperative"])
    extra, extra_compile = torch_variants(lambda: TorchLSTMLoop(64, with_head=True), seq)
    runs.update(extra)
    compile_s.update(extra_compile)
    interleaved(runs, 10)
    medians = interleaved(runs, args.repeats)
    print_table("small LSTM (hidden 64, batch 1, 50 steps), inference", medians, compile_s,
                "imperative")
    # Interleaving lets each variant evict the others' caches: also one at a time.
    alone = {name: interleaved({name: runs[name]}, args.repeats)[name]
             for name in ("dynamic tvm", "dynamic tvm tuned", "torch.compile") if name in runs}
    print("measured alone, ms per call: " + ", ".join(
        "%s %.3f" % (name, ms) for name, ms in alone.items()))
    report = gluon_dyn.hybridize.report(nets["dynamic tvm"])["tvm"]
    for plan in report["plans"]:
        print("dynamic tvm plan: runs %s; %s" % (plan["runs"], [
            (s["backend"], s["ops"], s["times_ms"]) for s in plan["segments"]]))


def control_flow_config(args, cache_dir, batch):
    hidden, steps = 512, 100
    seq = mx.nd.random.normal(shape=(steps, batch, hidden))
    names = ["dynamic mxnet", "dynamic tvm"] + (["dynamic tvm tuned"] if args.config_trials else [])
    nets = {name: Loop(gluon.rnn.LSTMCell(hidden, input_size=hidden)) for name in names}
    fused = gluon.rnn.LSTM(hidden, input_size=hidden)
    for net in list(nets.values()) + [fused]:
        net.initialize(mx.init.Xavier())
    same_params(nets["dynamic mxnet"], *[nets[name] for name in names[1:]])
    nets["dynamic mxnet"].hybridize(dynamic=True)
    nets["dynamic tvm"].hybridize(dynamic=True, backend="tvm",
                                  backend_options={"cache_dir": cache_dir})
    if args.config_trials:
        nets["dynamic tvm tuned"].hybridize(dynamic=True, backend="tvm", backend_options={
            "cache_dir": cache_dir, "tune": args.config_trials})
    fused.hybridize(static_alloc=True, static_shape=True)
    runs = {name: mx_runner(net, seq) for name, net in nets.items()}
    compile_s = {name: warm_dynamic(net, runs[name]) for name, net in nets.items()}
    runs["gluon.rnn.LSTM (fused)"] = mx_runner(fused, seq)
    check_close(runs["dynamic mxnet"], *[runs[name] for name in names[1:]])
    extra, extra_compile = torch_variants(lambda: TorchLSTMLoop(hidden, with_head=False), seq)
    runs.update(extra)
    compile_s.update(extra_compile)
    interleaved(runs, 3)
    medians = interleaved(runs, max(5, args.repeats // 10))
    print_table("LSTM hidden 512, 100 steps, batch %d, inference (per-step outputs stacked)"
                % batch, medians, compile_s, "dynamic mxnet")


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


def lenet_speed(args, cache_dir, batch):
    x = mx.nd.random.normal(shape=(batch, 1, 28, 28))
    net = lenet()
    net.initialize(mx.init.Xavier())
    net.hybridize(static_alloc=True, static_shape=True)
    compiled, compile_s = timed_first_call(
        lambda: tvm_bridge.compile_block(net, x, cache_dir=cache_dir))
    runs = {"mxnet hybridized": mx_runner(net, x), "compile_block": mx_runner(compiled, x)}
    check_close(runs["mxnet hybridized"], runs["compile_block"])
    interleaved(runs, 10)
    medians = interleaved(runs, args.repeats)
    print_table("LeNet, batch %d, inference" % batch, medians, {"compile_block": compile_s},
                "mxnet hybridized")
    print("compile_block plan: runs %s; %s" % (compiled.report()["runs"], [
        (s["backend"], s["ops"], s["times_ms"]) for s in compiled.report()["segments"]]))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--trials", type=int, default=64, help="meta-schedule trials (tuned row)")
    parser.add_argument("--config-trials", type=int, default=0,
                        help="meta-schedule trials for a tuned row at hidden 512 (0: none)")
    parser.add_argument("--cache-dir", default=None, help="TVM cache (default: the user cache)")
    parser.add_argument("--only", choices=("small", "config", "lenet"), default=None)
    args = parser.parse_args()
    mx.random.seed(0)
    print("TVM_NUM_THREADS=%d (tvm_bridge's default: the CPUs available, %d here)"
          % (configure_threads(), len(os.sched_getaffinity(0))))
    if args.only in (None, "small"):
        small_lstm(args, args.cache_dir)
    if args.only in (None, "config"):
        for batch in (1, 32):
            control_flow_config(args, args.cache_dir, batch)
    if args.only in (None, "lenet"):
        for batch in (1, 64):
            lenet_speed(args, args.cache_dir, batch)


if __name__ == "__main__":
    main()
