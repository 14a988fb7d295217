"""LeNet's layers one at a time and whole: MXNet (oneDNN) against tvm_bridge's convolutions.

Each program is a HybridBlock run two ways (benchmarks/harness.py: outputs
checked during warm-up, fresh inputs per call, interleaved, medians): MXNet
hybridize(static_alloc, static_shape) with parameters of its own (harness.twins),
and tvm_bridge.compile_block forced onto TVM (choose_by_measurement=False), so the
TVM row is TVM whatever it measures. Batch 1 and 64. GFLOP/s counts two flops
per multiply-add of the convolutions and dense layers and is computed from the
whole call (the Python/VM call costs are in it: at batch 1 they dominate) and,
for TVM, from its kernels alone: the plan's compiled function timed by TVM's
time_evaluator (median of 30 repeats of 10 calls), parameters prepared before.
"""
import argparse
import os
import tempfile

from tvm_bridge.runtime import configure_threads

configure_threads()  # before TVM's thread pool starts

import mxnet as mx  # noqa: E402
import tvm  # noqa: E402
from mxnet import gluon  # noqa: E402
from tvm import relax  # noqa: E402

import harness  # noqa: E402
import tvm_bridge  # noqa: E402
from tvm_bridge.runtime import PREPARE_FUNCTION  # noqa: E402
from tvm_bridge_speed import lenet  # noqa: E402

IMAGE = (1, 28, 28)


def layers():
    """(name, make block, input shape without the batch, multiply-adds per image)."""
    return [
        ("conv 1->20 k5, 28x28, relu",
         lambda: gluon.nn.Conv2D(20, kernel_size=5, in_channels=1, activation="relu"),
         IMAGE, 20 * 24 * 24 * 25),
        ("max pool 2x2, 20x24x24", lambda: gluon.nn.MaxPool2D(pool_size=2, strides=2),
         (20, 24, 24), 0),
        ("conv 20->50 k5, 12x12, relu",
         lambda: gluon.nn.Conv2D(50, kernel_size=5, in_channels=20, activation="relu"),
         (20, 12, 12), 50 * 8 * 8 * 20 * 25),
        ("max pool 2x2, 50x8x8", lambda: gluon.nn.MaxPool2D(pool_size=2, strides=2),
         (50, 8, 8), 0),
        ("LeNet (whole)", lenet, IMAGE,
         20 * 24 * 24 * 25 + 50 * 8 * 8 * 20 * 25 + 800 * 500 + 500 * 10),
    ]


def measure(name, make, shape, macs, batch, cache_dir, repeats):
    mx.random.seed(0)
    reference, net = harness.twins(make)
    example = harness.normal_array((batch,) + shape, 0)
    compiled = tvm_bridge.compile_block(net, example, cache_dir=cache_dir,
                                        choose_by_measurement=False)
    if any(s["backend"] != "tvm" for s in compiled.report()["segments"]):
        raise RuntimeError("%s: not all of it runs on TVM: %s" % (name, compiled.report()))
    timings = harness.compare(
        [harness.Variant("mxnet (oneDNN)", harness.gluon_call(reference)),
         harness.Variant("tvm_bridge", compiled)],
        lambda call: (harness.normal_array((batch,) + shape, call),), repeats)
    ms = {variant: timing.median_ms for variant, timing in timings.items()}
    ms["tvm kernels"] = kernels_ms(compiled, net, example)
    gflops = {variant: "%.1f" % (2 * macs * batch / (value * 1e6)) if macs else ""
              for variant, value in ms.items()}
    return [name, batch, ms["mxnet (oneDNN)"], ms["tvm_bridge"],
            harness.ratio(ms["mxnet (oneDNN)"], ms["tvm_bridge"]), ms["tvm kernels"],
            gflops["mxnet (oneDNN)"], gflops["tvm_bridge"], gflops["tvm kernels"]]


def kernels_ms(compiled, net, example):
    """Milliseconds of the VM function of `compiled`'s TVM segment (its kernels, no
    Python), its parameters prepared beforehand as the plan prepares them."""
    (step,) = compiled.plan.steps
    values = {p.name: p.data().asnumpy() for p in net.collect_params().values()}
    values["data"] = example.asnumpy()
    tensors = [tvm.runtime.tensor(values[compiled.plan.graph.nodes[node].name])
               for node, _ in step.input_order]
    machine = relax.VirtualMachine(step.function.executable, tvm.cpu())
    data = step.function.signature.num_data
    if data is not None:
        tensors = tensors[:data] + list(machine[PREPARE_FUNCTION](tensors[data:]))
    timer = machine.time_evaluator("main", tvm.cpu(), number=10, repeat=30)
    return timer(*tensors).median * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    print("TVM_NUM_THREADS=%s" % os.environ["TVM_NUM_THREADS"])
    rows = []
    with tempfile.TemporaryDirectory(prefix="conv_speed_") as cache:
        for batch in (1, 64):
            for index, (name, make, shape, macs) in enumerate(layers()):
                rows.append(measure(name, make, shape, macs, batch,
                                    os.path.join(cache, "%d_%d" % (index, batch)),
                                    args.repeats if batch == 1 else max(20, args.repeats // 4)))
    harness.print_table("LeNet's layers, inference, ms per call (medians, interleaved)",
                        ["program", "batch", "mxnet (oneDNN) ms", "tvm_bridge ms",
                         "tvm_bridge speed-up", "tvm kernels ms", "mxnet GFLOP/s",
                         "tvm_bridge GFLOP/s", "tvm kernels GFLOP/s"], rows)


if __name__ == "__main__":
    main()
