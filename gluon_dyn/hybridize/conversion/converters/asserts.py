"""Converter: `assert test, msg` becomes `assert ag__.asserted(test), msg`.

A test on a number read from a tensor and kept in the graph (host_values.py,
`assert start == START_TAG` after a Viterbi decoding) becomes a guard of the graph:
when it fails, the call runs as Python, where the assertion raises as written.
Any other test is Python's `assert`, unchanged (and gone under `python -O`).
"""
from malt.core import converter
from malt.pyct import templates


class AssertTransformer(converter.Base):

    def visit_Assert(self, node):
        node = self.generic_visit(node)
        node.test = templates.replace_as_expression("ag__.asserted(test)", test=node.test)
        return node


def transform(node, ctx):
    return AssertTransformer(ctx).visit(node)
