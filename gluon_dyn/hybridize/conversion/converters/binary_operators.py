"""Converter: `a + b`, `a < b`, ... become `ag__.binary_op(a, b, "+")`.

Python numbers that a graph loop or branch changes become one-element tensors;
MXNet's Symbol arithmetic does not broadcast, so `x + t` with such a `t` would
fail where the imperative `x + 3` works. The runtime operator broadcasts when
both operands are Symbols (operators/arithmetic.py).
"""
import ast

from malt.core import converter
from malt.pyct import templates

from .augmented_assignment import OPERATOR_NAMES

COMPARISON_NAMES = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
                    ast.NotEq: "!="}


class BinaryOperatorTransformer(converter.Base):

    def visit_BinOp(self, node):
        node = self.generic_visit(node)
        return _call(node.left, node.right, OPERATOR_NAMES[type(node.op)])

    def visit_Compare(self, node):
        node = self.generic_visit(node)
        if len(node.ops) != 1 or type(node.ops[0]) not in COMPARISON_NAMES:
            return node
        return _call(node.left, node.comparators[0], COMPARISON_NAMES[type(node.ops[0])])


def _call(left, right, name):
    return templates.replace_as_expression("ag__.binary_op(left, right, name)", left=left,
                                           right=right, name=ast.Constant(name))


def transform(node, ctx):
    return BinaryOperatorTransformer(ctx).visit(node)
