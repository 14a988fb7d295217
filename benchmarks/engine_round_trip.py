"""What a host read costs MXNet on this machine: one small operator and its read,
and one CartPole decision (examples/train/cartpole.py's policy on 20 states, read
back as the script reads it), as written and with hybridize(dynamic=True), on MXNet
and on TVM (which runs in the calling thread): its compiled function's whole call in
one C call (tvm_bridge.runtime.tvm_caller, as installed), and with the arrays handed
to TVM and back in one C call each way (tvm_caller off for that variant's calls).

MXNet runs every operator on its engine's worker thread: a call pushes the work
there and a read waits for it, so each read wakes the worker and then the caller.
A call that hands its input over from NumPy (`mx.nd.from_numpy`, as the training
scripts pass their batches) also frees it, and MXNet frees an array through the
engine too. The same tanh computed by NumPy in the calling thread is the reference.

    .venv/bin/python benchmarks/engine_round_trip.py [--repeats 300]
"""
import argparse
import os
import sys

import mxnet as mx
import numpy as np

import harness

sys.path.insert(0, os.path.join(harness.REPO, "examples", "train"))
import trainkit  # noqa: E402
from cartpole import Policy  # noqa: E402

from gluon_dyn.hybridize import report  # noqa: E402
from tvm_bridge import runtime  # noqa: E402

ENVIRONMENTS, STATE = 20, 4
HIDDEN, LAYERS = 64, 2


def operator_rows(repeats):
    """(variant, us) of tanh on (20, 64) float32s."""
    def make_inputs(call):
        values = np.random.RandomState(call).standard_normal(
            (ENVIRONMENTS, HIDDEN)).astype(np.float32)
        return [values, mx.nd.array(values)]

    variants = [harness.Variant("tanh: NumPy, in the calling thread",
                                lambda values, _: np.tanh(values)),
                harness.Variant("tanh: MXNet operator on an array MXNet made, then read",
                                lambda _, array: mx.nd.tanh(array).asnumpy()),
                harness.Variant("tanh: MXNet operator on an array from NumPy, then read",
                                lambda values, _: mx.nd.tanh(mx.nd.from_numpy(values)).asnumpy())]
    timings = harness.compare(variants, make_inputs, repeats, warmup=20)
    return [(v.name, 1000 * timings[v.name].median_ms) for v in variants]


def decision_rows(repeats):
    """(variant, us) of one decision: the policy's push-right probabilities, read."""
    def policy(backend):
        mx.random.seed(1)
        net = Policy(HIDDEN, LAYERS, prefix="policy_")
        net.initialize(mx.init.Xavier())
        net(mx.nd.zeros((1, STATE)))    # its deferred shapes, drawn now: same weights in all
        if backend:
            net.hybridize(dynamic=True, backend=backend)
        return net

    def decide(net, tvm_caller=runtime.tvm_caller):
        call = harness.gluon_call(net)

        def run(state):
            runtime.tvm_caller = tvm_caller
            return np.exp(call(trainkit.batch_array(state))[0].asnumpy()[:, 1])
        run.measuring = call.measuring    # warm-up lasts until the speed check settles
        return run

    def make_inputs(call):
        return [np.random.RandomState(call).uniform(-0.05, 0.05, size=(ENVIRONMENTS, STATE))]

    dynamic, on_tvm, each_way = policy("mxnet"), policy("tvm"), policy("tvm")
    variants = [harness.Variant("decision: imperative", decide(policy(None))),
                harness.Variant("decision: hybridize(dynamic=True)", decide(dynamic)),
                harness.Variant('decision: hybridize(dynamic=True, backend="tvm")',
                                decide(on_tvm)),
                harness.Variant('decision: backend="tvm", one C call each way',
                                decide(each_way, None))]
    try:
        timings = harness.compare(variants, make_inputs, repeats, warmup=20)
    finally:
        runtime.tvm_caller = decide.__defaults__[0]
    for name, net in (("dynamic", dynamic), ("tvm", on_tvm), ("tvm, each way", each_way)):
        served = report(net)["calls"]
        print("the %s policy: %d of %d calls served by its graph"
              % (name, served["graph"], served["total"]), file=sys.stderr)
    plan = report(on_tvm)["tvm"]["plans"][0]
    print("the tvm policy's graph: %s; plan calls %s, segments on %s" % (
        plan["runs"], plan["calls"], [segment["backend"] for segment in plan["segments"]]),
        file=sys.stderr)
    for name, net in (("tvm", on_tvm), ("tvm, each way", each_way)):
        print("the %s policy's segments: %s calls made in one C call" % (
            name, [segment["native_calls"] for segment in
                   report(net)["tvm"]["plans"][0]["segments"]]), file=sys.stderr)
    return [(v.name, 1000 * timings[v.name].median_ms) for v in variants]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=300)
    args = parser.parse_args()
    harness.print_table("A host read on MXNet's engine (tanh on 20 x 64 float32s; one CartPole "
                        "decision for 20 environments)", ["variant", "us a call"],
                        operator_rows(args.repeats) + decision_rows(args.repeats))


if __name__ == "__main__":
    main()
