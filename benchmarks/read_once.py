"""Data inputs read once (gluon_dyn/hybridize/passes/read_once.py): a planned
inference CachedOp of a gather-heavy graph, its parameters marked, as traced and
with its data inputs read once.

The graph is the shape of a recursion body's batched graph: `--gathers` rows of an
arena picked by an index array (each `take` reading both data inputs), each
projected by a weight (a parameter) and summed. Times are until MXNet finished
(harness.py: interleaved calls, fresh inputs, medians).

    .venv/bin/python benchmarks/read_once.py [--gathers 16] [--rows 8] [--repeats 200]
"""
import argparse

import mxnet as mx
import numpy as np

import harness
from gluon_dyn.hybridize.passes.read_once import planned_op

WIDTH = 16


def gathers(count):
    arena, rows, weight = mx.sym.var("arena"), mx.sym.var("rows"), mx.sym.var("weight")
    parts = [mx.sym.FullyConnected(mx.sym.take(arena, rows + k), weight, no_bias=True,
                                   num_hidden=WIDTH) for k in range(count)]
    return mx.sym.add_n(*parts)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gathers", type=int, default=16)
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    symbol = gathers(args.gathers)
    names = symbol.list_inputs()
    roles = [("data_indices", [names.index("arena"), names.index("rows")]),
             ("param_indices", [names.index("weight")])]
    as_traced = mx.nd.CachedOp(symbol, flags=[("static_alloc", True), ("static_shape", True)]
                               + roles)
    read_once = planned_op(symbol, roles)
    weight = mx.nd.array(np.random.RandomState(0).standard_normal((WIDTH, WIDTH)) * 0.1)

    def make_inputs(call):
        rng = np.random.RandomState(call)
        values = {"arena": mx.nd.array(rng.standard_normal((4 * args.rows, WIDTH))),
                  "rows": mx.nd.array(rng.randint(0, 3 * args.rows, size=args.rows)),
                  "weight": weight}
        return [values[name] for name in names]

    variants = [harness.Variant("parameters marked, as traced", lambda *a: as_traced(*a)),
                harness.Variant("parameters marked, data read once", lambda *a: read_once(*a))]
    timings = harness.compare(variants, make_inputs, args.repeats, warmup=20)
    harness.print_table(
        "A planned CachedOp of %d gathers of %d rows (us a call)" % (args.gathers, args.rows),
        ["variant", "us"], [[v.name, 1000 * timings[v.name].median_ms] for v in variants])


if __name__ == "__main__":
    main()
