"""tvm_bridge on static HybridBlocks: MXNet's hybridized graph vs tvm_bridge.compile_block.

Three programs, inference, variants interleaved (medians of many repeats after
warm-up; every MXNet/TVM variant is checked against MXNet's output):
(a) LSTM hidden 64, batch 1, 50 steps, hand-unrolled: MXNet hybridize(static_alloc,
    static_shape) vs compile_block untuned vs compile_block tuned (--trials
    meta-schedule trials per TVM segment; tuning time printed);
(b) MXNet's control-flow benchmark configuration (LSTM hidden 512, 100 steps,
    batch 1 and 32) unrolled: MXNet hybridized vs gluon.rnn.LSTM (fused oneDNN
    operator) vs compile_block;
(c) LeNet, batch 1 and 64: MXNet hybridized vs compile_block (TVM or MXNet per
    segment, by measurement).
PyTorch eager and torch.compile run the same programs when torch is installed
(`make bench-extra`). TVM runs a thread per available CPU unless TVM_NUM_THREADS
says otherwise. Compile times are wall seconds of the variant's first call
(compile_block: partition, compile, tuning and its own measurements). The TVM
cache is a fresh temporary folder unless --cache-dir is given.
"""
import argparse
import os
import sys
import tempfile
import time

from tvm_bridge.runtime import configure_threads

configure_threads()  # before TVM's thread pool starts

import mxnet as mx  # noqa: E402
import numpy as np  # noqa: E402
from mxnet import gluon  # noqa: E402

import tvm_bridge  # noqa: E402
from gluon_dyn.measure import median_time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from small_lstm import UnrolledLSTM  # noqa: E402
from tvm_bridge_speed import TorchLSTMLoop, lenet, torch  # noqa: E402

WARMUP = 10
MXNET = "mxnet hybridized"  # the reference variant


class UnrolledCellLoop(gluon.HybridBlock):
    """A recurrent cell unrolled over a fixed number of steps; per-step outputs stacked."""

    def __init__(self, cell, steps, batch):
        super().__init__()
        self.steps, self.batch = steps, batch
        with self.name_scope():
            self.cell = cell

    def hybrid_forward(self, F, seq):
        states = self.cell.begin_state(batch_size=self.batch, func=F.zeros)
        outputs = []
        for x in F.split(seq, num_outputs=self.steps, axis=0, squeeze_axis=True):
            out, states = self.cell(x, states)
            outputs.append(out)
        return F.stack(*outputs)


def timed(fn):
    """(fn's result, seconds it took)."""
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def waited(fn):
    """fn, returning its (first) output once computed."""
    def run():
        out = fn()
        out = out[0] if isinstance(out, (list, tuple)) else out
        out.wait_to_read()
        return out
    return run


def torch_run(net, data):
    def run():
        with torch.no_grad():
            return net(data)
    return run


def add_torch(runs, compile_s, make_net, data):
    """PyTorch eager and torch.compile variants of the same program, when torch is here."""
    if torch is None:
        return
    torch.set_num_threads(2)
    net, tensor = make_net(), torch.from_numpy(data.asnumpy())
    runs["pytorch eager"] = torch_run(net, tensor)
    compiled = torch.compile(net if isinstance(net, torch.nn.Module) else net.__call__)
    runs["torch.compile"] = torch_run(compiled, tensor)
    _, compile_s["torch.compile"] = timed(runs["torch.compile"])


def add_compiled(runs, compile_s, name, net, *inputs, **options):
    """A compile_block variant of `net`; returns the CompiledBlock."""
    compiled, compile_s[name] = timed(lambda: tvm_bridge.compile_block(net, *inputs, **options))
    runs[name] = waited(lambda: compiled(*inputs))
    return compiled


def check_against(reference, runs, names):
    expected = reference().asnumpy()
    for name in names:
        np.testing.assert_allclose(runs[name]().asnumpy(), expected, rtol=1e-4, atol=1e-5,
                                   err_msg=name)


def measure_and_print(title, runs, compile_s, reference, repeats):
    medians = {name: seconds * 1000 for name, seconds in
               median_time(runs, warmup=WARMUP, repeats=repeats).items()}
    print("\n### %s\n" % title)
    print("| variant | ms per call | ratio vs %s | compile s |" % reference)
    print("|---|---|---|---|")
    for name, ms in medians.items():
        print("| %s | %.3f | %.2f | %s |" % (name, ms, ms / medians[reference],
                                            "%.1f" % compile_s[name] if name in compile_s else ""))
    sys.stdout.flush()


def describe_plan(name, compiled):
    report = compiled.report()
    print("%s plan: runs %s (plan %.3f ms, one MXNet graph %.3f ms); segments: %s" % (
        name, report["runs"], report["plan_ms"], report["whole_graph_mxnet_ms"],
        "; ".join("%s %d ops %s compile %s s tune %s s" % (
            s["backend"], s["ops"], {k: round(v, 3) for k, v in s["times_ms"].items()},
            None if s["compile_s"] is None else round(s["compile_s"], 1),
            None if s["tune_s"] is None else round(s["tune_s"], 1))
                  for s in report["segments"])))


def hybridized(net, *inputs):
    """Initialise `net` and hybridize it (static_alloc, static_shape); returns the
    variants and compile times, holding its run as the reference, MXNET."""
    net.initialize(mx.init.Xavier())
    net.hybridize(static_alloc=True, static_shape=True)
    run = waited(lambda: net(*inputs))
    _, first_call = timed(run)
    return {MXNET: run}, {MXNET: first_call}


def small_lstm(args):
    mx.random.seed(0)
    seq = mx.nd.random.normal(shape=(50, 1, 64))
    net = UnrolledLSTM()
    runs, compile_s = hybridized(net, seq)
    # Untuned first: compile_module applies tuning records once they exist.
    untuned = add_compiled(runs, compile_s, "compile_block", net, seq, cache_dir=args.cache_dir)
    tuned_name = "compile_block tuned (%d trials)" % args.trials
    tuned = add_compiled(runs, compile_s, tuned_name, net, seq, cache_dir=args.cache_dir,
                         tune=args.trials)
    check_against(runs[MXNET], runs, ["compile_block", tuned_name])
    add_torch(runs, compile_s, lambda: TorchLSTMLoop(64, with_head=True), seq)
    measure_and_print("(a) LSTM hidden 64, batch 1, 50 steps, inference", runs, compile_s,
                      MXNET, args.repeats)
    describe_plan("compile_block", untuned)
    describe_plan(tuned_name, tuned)


def control_flow_config(args, batch, hidden=512, steps=100):
    mx.random.seed(0)
    seq = mx.nd.random.normal(shape=(steps, batch, hidden))
    net = UnrolledCellLoop(gluon.rnn.LSTMCell(hidden, input_size=hidden), steps, batch)
    runs, compile_s = hybridized(net, seq)
    fused = gluon.rnn.LSTM(hidden, input_size=hidden)
    fused_runs, _ = hybridized(fused, seq)
    runs["gluon.rnn.LSTM (fused)"] = fused_runs[MXNET]
    compiled = add_compiled(runs, compile_s, "compile_block", net, seq, cache_dir=args.cache_dir)
    check_against(runs[MXNET], runs, ["compile_block"])
    add_torch(runs, compile_s, lambda: TorchLSTMLoop(hidden, with_head=False), seq)
    measure_and_print("(b) LSTM hidden %d, %d steps, batch %d, inference (outputs stacked)"
                      % (hidden, steps, batch), runs, compile_s, MXNET,
                      max(5, args.repeats // 10))
    describe_plan("compile_block", compiled)


def torch_lenet():
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(1, 20, 5), nn.ReLU(), nn.MaxPool2d(2, 2),
                         nn.Conv2d(20, 50, 5), nn.ReLU(), nn.MaxPool2d(2, 2), nn.Flatten(),
                         nn.Linear(800, 500), nn.ReLU(), nn.Dropout(0.5),
                         nn.Linear(500, 10)).eval()


def lenet_speed(args, batch):
    mx.random.seed(0)
    x = mx.nd.random.normal(shape=(batch, 1, 28, 28))
    net = lenet()
    runs, compile_s = hybridized(net, x)
    compiled = add_compiled(runs, compile_s, "compile_block", net, x, cache_dir=args.cache_dir)
    check_against(runs[MXNET], runs, ["compile_block"])
    add_torch(runs, compile_s, torch_lenet, x)
    measure_and_print("(c) LeNet, batch %d, inference" % batch, runs, compile_s,
                      MXNET, args.repeats)
    describe_plan("compile_block", compiled)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--trials", type=int, default=64,
                        help="meta-schedule trials per TVM segment for the tuned variant")
    parser.add_argument("--cache-dir", default=None,
                        help="TVM cache (default: a fresh temporary folder)")
    parser.add_argument("--only", choices=("a", "b", "c"), default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tvm_static_") as fresh:
        args.cache_dir = args.cache_dir or fresh
        print("TVM_NUM_THREADS=%s, torch %s" % (os.environ["TVM_NUM_THREADS"],
                                                 torch.__version__ if torch else "absent"))
        if args.only in (None, "a"):
            small_lstm(args)
        if args.only in (None, "b"):
            for batch in (1, 32):
                control_flow_config(args, batch)
        if args.only in (None, "c"):
            for batch in (1, 64):
                lenet_speed(args, batch)


if __name__ == "__main__":
    main()
