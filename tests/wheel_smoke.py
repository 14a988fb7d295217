"""Smoke test of an installed gluon_dyn (run by `make wheel-test` in a fresh virtual
environment holding only the wheel and its dependencies, from outside the source tree).

Checks that the package and its C++ operator library come from the installation,
that the operators are registered, that a dynamic block runs as a graph (a guard
of a speculated branch fails inside the graph: only the C++ assert operator reports
that), and that a block using gluon_dyn's control flow exports and re-imports.
Prints one line per check; exits non-zero on the first failure.
"""
import os
import sys
import sysconfig
import tempfile

import mxnet as mx
import numpy as np
from mxnet import gluon

import gluon_dyn
from gluon_dyn import native
from gluon_dyn.ops import cond, while_loop
from storm_programs import HIDDEN, AlternatingBranch  # beside this file


def check(what, condition, detail=""):
    if not condition:
        sys.exit("wheel smoke test FAILED: %s %s" % (what, detail))
    print("ok:", what)


class Refine(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(4, in_units=4)

    def hybrid_forward(self, F, x, steps):
        _, (_, h) = while_loop(lambda i, h: i < steps,
                               lambda i, h: ([], [i + 1, F.tanh(self.dense(h))]),
                               [F.zeros((1,)), x], max_iterations=4)
        return cond(F.sum(h) > 0, lambda: h * 2, lambda: h - 1)


def dynamic_block_runs_as_a_graph():
    imperative, dynamic = AlternatingBranch(), AlternatingBranch()
    for net in (imperative, dynamic):
        net.initialize(mx.init.Constant(0.1))
    dynamic.hybridize(dynamic=True, check_speed=False)
    # Three profiled calls see the `if` go one way, the fourth traces a graph that
    # assumes it, the fifth goes the other way: the guard fails inside the graph.
    signs = [1, 1, 1, 1, -1, -1]
    for call, sign in enumerate(signs):
        x = mx.nd.array(np.random.RandomState(call).uniform(0.1, 1, (2, HIDDEN)) * sign)
        np.testing.assert_allclose(dynamic(x).asnumpy(), imperative(x).asnumpy(), rtol=1e-5)
    report = gluon_dyn.hybridize.report(dynamic)
    check("a dynamic block ran as a graph, its guard failed inside it",
          report["traces"] >= 1 and len(report["guard_failures"]) == 1
          and report["fallback"] is None, report)


def export_and_reimport(folder):
    net = Refine()
    net.initialize(mx.init.Constant(0.1))
    net.hybridize()
    x, steps = mx.nd.ones((2, 4)), mx.nd.array([3])
    expected = net(x, steps).asnumpy()
    prefix = os.path.join(folder, "refine")
    net.export(prefix)
    loaded = gluon.SymbolBlock.imports(prefix + "-symbol.json", ["data0", "data1"],
                                       prefix + "-0000.params")
    check("export and SymbolBlock.imports give the same outputs",
          np.allclose(loaded(x, steps).asnumpy(), expected, rtol=1e-6))


def main():
    site = sysconfig.get_paths()["purelib"]
    check("gluon_dyn is the installed package", gluon_dyn.__file__.startswith(site),
          gluon_dyn.__file__)
    check("its operator library is the installed one", native.LIBRARY_PATH.startswith(site),
          native.LIBRARY_PATH)
    check("the C++ operators are registered",
          all(hasattr(ns, op) for ns in (mx.nd, mx.sym)
              for op in (native.ASSERT_OP, native.GRAD_TIE_OP)))
    dynamic_block_runs_as_a_graph()
    with tempfile.TemporaryDirectory() as folder:
        export_and_reimport(folder)


if __name__ == "__main__":
    main()
