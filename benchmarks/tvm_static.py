"""tvm_bridge on static HybridBlocks: MXNet's hybridized graph vs tvm_bridge.compile_block.

Three programs, inference (benchmarks/harness.py: every variant's output checked
against MXNet's during warm-up, fresh input arrays per call, interleaved
variants, medians):
(a) LSTM hidden 64, batch 1, 50 steps, hand-unrolled: MXNet hybridize(static_alloc,
    static_shape) vs compile_block untuned (an empty TVM cache of its own) vs
    compile_block tuned (--trials meta-schedule trials per TVM segment);
(b) MXNet's control-flow benchmark configuration (LSTM hidden 512, 100 steps,
    batch 1 and 32) unrolled: MXNet hybridized vs gluon.rnn.LSTM (fused oneDNN
    operator, same weights) vs compile_block;
(c) LeNet, batch 1 and 64: MXNet hybridized vs compile_block (TVM or MXNet per
    segment, by measurement).
PyTorch eager and torch.compile run the same programs, in a process of their own,
when torch is installed (`make setup`). TVM runs a thread per available CPU
unless TVM_NUM_THREADS says otherwise. Compile times are wall seconds of
compile_block (partition, compile, tuning and its own measurements). The TVM
caches are fresh temporary folders unless --cache-dir is given.
"""
import argparse
import contextlib
import os
import sys
import tempfile
import time

from tvm_bridge.runtime import configure_threads

configure_threads()  # before TVM's thread pool starts

import mxnet as mx  # noqa: E402
from mxnet import gluon  # noqa: E402

import harness  # noqa: E402
import tvm_bridge  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from control_flow_rnn import cell_values, fused_layer  # noqa: E402
from small_lstm import UnrolledLSTM, torch_twin  # noqa: E402
from tvm_bridge_speed import lenet  # noqa: E402

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


def compiled_variant(compile_s, name, net, inputs, cache_dir, **options):
    """A compile_block variant of `net` (its own TVM cache), timed while compiling."""
    start = time.perf_counter()
    compiled = tvm_bridge.compile_block(net, *inputs, cache_dir=os.path.join(cache_dir, name),
                                        **options)
    compile_s[name] = time.perf_counter() - start
    return harness.Variant(name, compiled, rtol=1e-3, atol=1e-4), compiled


def measure_and_print(title, variants, make_inputs, compile_s, repeats):
    timings = harness.compare(variants, make_inputs, repeats)
    ms = {name: timing.median_ms for name, timing in timings.items()}
    harness.print_table(title, ["variant", "ms per call", "ratio vs %s" % MXNET, "compile s"],
                        [[name, value, "%.2f" % (value / ms[MXNET]), compile_s.get(name, "")]
                         for name, value in ms.items()])


def describe_plan(name, compiled):
    report = compiled.report()
    print("%s plan: runs %s (plan %s ms, one MXNet graph %s ms); segments: %s" % (
        name, report["runs"], report["plan_ms"], report["whole_graph_mxnet_ms"],
        "; ".join("%s %d ops %s compile %s s tune %s s" % (
            s["backend"], s["ops"], {k: round(v, 3) for k, v in s["times_ms"].items()},
            None if s["compile_s"] is None else round(s["compile_s"], 1),
            None if s["tune_s"] is None else round(s["tune_s"], 1))
                  for s in report["segments"])))


def hybridized(net):
    """`net` initialised and hybridized (static_alloc, static_shape): the reference."""
    net.initialize(mx.init.Xavier())
    net.hybridize(static_alloc=True, static_shape=True)
    return harness.Variant(MXNET, harness.gluon_call(net))


def small_lstm(args, workers):
    """(a); `workers` (a contextlib.ExitStack) closes PyTorch's."""
    shape = (50, 1, 64)
    net = UnrolledLSTM()
    variants, compile_s = [hybridized(net)], {}
    example = (harness.normal_array(shape, 0),)
    untuned, _ = compiled_variant(compile_s, "compile_block", net, example, args.cache_dir)
    tuned_name = "compile_block tuned (%d trials)" % args.trials
    tuned, tuned_block = compiled_variant(compile_s, tuned_name, net, example, args.cache_dir,
                                          tune=args.trials)
    variants += [untuned, tuned] + harness.torch_variants(workers, *torch_twin(net))
    measure_and_print("(a) LSTM hidden 64, batch 1, 50 steps, inference", variants,
                      lambda call: (harness.normal_array(shape, call),), compile_s, args.repeats)
    describe_plan(tuned_name, tuned_block)


def control_flow_config(args, workers, batch, hidden=512, steps=100):
    """(b) at `batch`; `workers` (a contextlib.ExitStack) closes PyTorch's."""
    shape = (steps, batch, hidden)
    net = UnrolledCellLoop(gluon.rnn.LSTMCell(hidden, input_size=hidden), steps, batch)
    variants, compile_s = [hybridized(net)], {}
    variants.append(harness.Variant("gluon.rnn.LSTM (fused)",
                                    harness.gluon_call(fused_layer(net.cell)),
                                    rtol=1e-3, atol=1e-4))
    variant, compiled = compiled_variant(compile_s, "compile_block b%d" % batch, net,
                                         (harness.normal_array(shape, 0),), args.cache_dir)
    variants.append(variant)
    variants += harness.torch_variants(workers, "build_cell_loop", cell_values(net.cell),
                                       rtol=1e-3, atol=1e-4)
    measure_and_print("(b) LSTM hidden %d, %d steps, batch %d, inference (outputs stacked)"
                      % (hidden, steps, batch), variants,
                      lambda call: (harness.normal_array(shape, call),), compile_s,
                      max(3, args.repeats // 10))
    describe_plan("compile_block", compiled)


def lenet_speed(args, workers, batch):
    """(c) at `batch`; `workers` (a contextlib.ExitStack) closes PyTorch's."""
    shape = (batch, 1, 28, 28)
    reference, net = harness.twins(lenet)
    variants, compile_s = [harness.Variant(MXNET, harness.gluon_call(reference))], {}
    variant, compiled = compiled_variant(compile_s, "compile_block b%d" % batch, net,
                                         (harness.normal_array(shape, 0),), args.cache_dir)
    variants.append(variant)
    variants += harness.torch_variants(
        workers, "build_lenet", [harness.layer_values(layer) for layer in net
                                 if layer.params.keys()])
    measure_and_print("(c) LeNet, batch %d, inference" % batch, variants,
                      lambda call: (harness.normal_array(shape, call),), compile_s, args.repeats)
    describe_plan("compile_block", compiled)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--trials", type=int, default=64,
                        help="meta-schedule trials per TVM segment for the tuned variant")
    parser.add_argument("--cache-dir", default=None,
                        help="TVM caches (default: a fresh temporary folder)")
    parser.add_argument("--only", choices=("a", "b", "c"), default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tvm_static_") as fresh:
        args.cache_dir = args.cache_dir or fresh
        print("TVM_NUM_THREADS=%s" % os.environ["TVM_NUM_THREADS"])
        if args.only in (None, "a"):
            with contextlib.ExitStack() as workers:
                small_lstm(args, workers)
        if args.only in (None, "b"):
            for batch in (1, 32):
                with contextlib.ExitStack() as workers:
                    control_flow_config(args, workers, batch)
        if args.only in (None, "c"):
            for batch in (1, 64):
                with contextlib.ExitStack() as workers:
                    lenet_speed(args, workers, batch)


if __name__ == "__main__":
    main()
