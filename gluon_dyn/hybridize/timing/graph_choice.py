"""Equivalent forms of one inference graph, the fastest by measurement serving calls.

A loop over a Gluon cell runs as T unrolled steps or as MXNet's fused RNN
operator (fused_cells.py), and which is faster depends on the shapes and the CPU:
at hidden 512 the fused operator took 55 ms against 100 unrolled at batch 32, and
24 against 15 at batch 1. So both are measured on the call's inputs before the
first serves, and measured again when MeasuredChoice's policy says (a timed call
much slower than expected, the machine's load changed, scheduled re-checks).
"""
import mxnet as mx

from ...measure import MeasuredChoice, decide_by_timing, interleaved_samples

REPEATS = 7     # timed calls per form and measurement (MeasuredChoice's fewest)


class MeasuredGraphs:
    """Called like each of `forms` (name -> (graph, run): the graph's symbol and a
    callable running it on the capture's inputs), it runs the one `choice` keeps;
    `incumbent` serves until another is measured faster."""

    def __init__(self, forms, incumbent):
        self.forms = dict(forms)
        self.choice = MeasuredChoice(tuple(self.forms), incumbent=incumbent)

    @property
    def graph(self):
        """The symbol of the form serving calls."""
        return self.forms[self.choice.chosen][0]

    def __call__(self, *inputs):
        if not self.choice.history:
            self._measure(inputs, "first call")
        run = self.forms[self.choice.chosen][1]
        return self.choice.serve(lambda: run(*inputs), lambda _: mx.nd.waitall(),
                                 lambda why: self._measure(inputs, why))

    def _measure(self, inputs, why):
        def timed(run):
            return lambda: (run(*inputs), mx.nd.waitall())
        decide_by_timing(self.choice, {name: timed(run) for name, (_, run) in self.forms.items()},
                         why, REPEATS, interleaved_samples)   # a global: tests script it

    def report(self):
        return dict(self.choice.report(), forms=list(self.forms))

