"""Dropout while training: MXNet's operator against gluon_dyn_dropout, which graphs of
recorded training runs use (gluon_dyn/hybridize/passes/equivalent_ops.py).

Both draw from MXNet's random states, so each call first puts back the states of
one of eight seeds (gluon_dyn/random_states.py: a 5 MB copy) and both variants compute
the same result, checked by the harness; the table also times that copy alone.
Times are until MXNet finished (harness.py: interleaved calls, fresh inputs,
medians).

    .venv/bin/python benchmarks/dropout.py [--rows 128] [--columns 256] [--repeats 200]
"""
import argparse

import mxnet as mx
import numpy as np
from mxnet import autograd

import harness
from gluon_dyn import native, random_states

P = 0.3
STATE_COPIES = 8


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=128)
    parser.add_argument("--columns", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()

    # A copy of the states is 5 MB: calls share eight, read only. Each state is 300
    # numbers into its 624 (a seed leaves all to be renewed at the first draw).
    copies = []
    for seed in range(STATE_COPIES):
        mx.random.seed(seed)
        mx.nd.random.uniform(shape=(300 * 1024,)).wait_to_read()
        copies.append(random_states.saved())

    def make_inputs(call):
        x = mx.nd.array(np.random.RandomState(call).standard_normal((args.rows, args.columns)))
        return x, copies[call % STATE_COPIES]

    def drawn(op):
        def run(x, states):
            random_states.restore(states)
            with autograd.train_mode():
                return op(x)
        return run

    def mxnet(x):
        return mx.nd.Dropout(x, p=P)

    def ours(x):
        return getattr(mx.nd, native.DROPOUT_OP)(x, p=str(P))[0]

    variants = [harness.Variant("MXNet's Dropout", drawn(mxnet)),
                harness.Variant("gluon_dyn_dropout", drawn(ours))]
    timings = harness.compare(variants, make_inputs, args.repeats, warmup=10)

    def states_only(x, states):
        random_states.restore(states)
        return x.copy()

    alone = harness.compare([harness.Variant("states put back", states_only)], make_inputs,
                            args.repeats, warmup=10)
    rows = [[v.name, 1000 * timings[v.name].median_ms] for v in variants]
    rows.append(["putting the states back alone", 1000 * alone["states put back"].median_ms])
    harness.print_table("Dropout (p=%g) of a (%d, %d) float32 array while training (us a call, "
                        "the states put back first)" % (P, args.rows, args.columns),
                        ["variant", "us"], rows)


if __name__ == "__main__":
    main()
