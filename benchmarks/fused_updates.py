"""`trainer.step` as written against `gluon_dyn.fused_updates(trainer)`: the
optimizer's update alone, for the parameter sets of examples/train's LeNet and
LSTM language model.

Each variant is a Trainer over its own copy of the same parameters. A call copies
that call's gradients (new arrays, the same values for both variants) into the
parameters' gradient buffers, untimed, then times `trainer.step(batch)` until MXNet
has finished (benchmarks/harness.py: warm-up calls check that both variants' weights
agree, then timed calls interleaved, medians).

With MXNet's operators on 2 OpenMP threads (the harness's default here) and the 2
cores busy with other work, every kernel launched on both threads (the multi-tensor
kernels, broadcasts; not the small elementwise ones, which run on one) measured
~8 ms, as written and fused alike: the medians then count launches. With
MXNET_OMP_MAX_THREADS=1 the numbers are stable from run to run.
"""
import argparse
import contextlib

import mxnet as mx
import numpy as np
from mxnet import gluon

import gluon_dyn
import harness
from gluon_dyn.measure import timed_ms

BATCH = 32
# examples/train/lenet.py (8x8 digits) and lstm_lm.py (~100 characters, embed 32,
# hidden 200): their parameters' shapes.
PARAMETER_SETS = {
    "LeNet": [(16, 1, 3, 3), (16,), (32, 16, 3, 3), (32,), (64, 128), (64,), (10, 64), (10,)],
    "LSTM LM": [(100, 32), (800, 32), (800, 200), (800,), (800,), (100, 200), (100,)],
}
OPTIMIZERS = {
    "Adam (the scripts' optimizer)": ("adam", {"learning_rate": 0.001}),
    "Adam, wd 1e-4, clip 1": ("adam", {"learning_rate": 0.001, "wd": 1e-4,
                                        "clip_gradient": 1.0}),
    "SGD, momentum 0.9": ("sgd", {"learning_rate": 0.01, "momentum": 0.9}),
    "AdaGrad": ("adagrad", {"learning_rate": 0.01}),
    "RMSProp": ("rmsprop", {"learning_rate": 0.001}),
}


def parameters(shapes):
    mx.random.seed(0)
    params = []
    for i, shape in enumerate(shapes):
        param = gluon.Parameter("p%d" % i, shape=shape)
        param.initialize(mx.init.Normal(0.1))
        params.append(param)
    return params


def stepping(trainer, params):
    """A self-timed `run`: gradients in (untimed), then the timed step."""
    def run(*grads):
        for param, grad in zip(params, grads):
            grad.copyto(param.grad())
            param.data()._fresh_grad = True   # as a backward leaves it
        mx.nd.waitall()
        _, ms = timed_ms(lambda: trainer.step(BATCH))
        return [param.data() for param in params], ms
    return run


def variants(shapes, optimizer, options):
    result = []
    for name, fused in (("trainer.step as written", False), ("fused", True)):
        params = parameters(shapes)
        trainer = gluon.Trainer(params, optimizer, dict(options))
        if fused:
            gluon_dyn.fused_updates(trainer)
        result.append(harness.Variant(name, stepping(trainer, params), self_timed=True,
                                      rtol=1e-5, atol=1e-5))
    return result, trainer


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    rows = []
    for set_name, shapes in PARAMETER_SETS.items():
        for optimizer_name, (optimizer, options) in OPTIMIZERS.items():
            runs, fused = variants(shapes, optimizer, options)
            timings = harness.compare(
                runs, lambda call: [harness.normal_array(shape, call) for shape in shapes],
                args.repeats, warmup=10)
            ms = {name: timing.median_ms for name, timing in timings.items()}
            done = gluon_dyn.training.report(fused)
            assert done["fused_steps"] and not done["loop_steps"], done
            calls = sum(done["op_calls"].values()) / done["fused_steps"]
            rows.append([set_name, optimizer_name, len(shapes),
                         int(sum(np.prod(shape) for shape in shapes)),
                         ms["trainer.step as written"], ms["fused"],
                         harness.ratio(ms["trainer.step as written"], ms["fused"]),
                         "%.0f: %s" % (calls, ", ".join(sorted(done["op_calls"])))])
    harness.print_table(
        "The optimizer's update: trainer.step(%d) as written against fused, ms per step "
        "(medians of %d, interleaved)" % (BATCH, args.repeats),
        ["parameters", "optimizer", "tensors", "elements", "as written", "fused",
         "speed-up", "fused calls a step"], rows)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
