"""Converter: `x op= y` becomes `x = ag__.augmented_assign(x, y, "op")`.

MXNet Symbols refuse in-place operators (`+=` raises NotImplementedForSymbol)
rather than falling back to `x = x + y`; the runtime operator rebinds for
Symbols and keeps Python's in-place semantics for everything else
(operators/arithmetic.py).
"""
import ast

from malt.core import converter
from malt.pyct import templates

OPERATOR_NAMES = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
                  ast.Mod: "%", ast.Pow: "**", ast.MatMult: "@", ast.BitAnd: "&", ast.BitOr: "|",
                  ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>"}


class AugmentedAssignmentTransformer(converter.Base):

    def visit_AugAssign(self, node):
        node = self.generic_visit(node)
        template = "target = ag__.augmented_assign(target, value, operator_name)"
        return templates.replace(template, target=node.target, value=node.value,
                                 operator_name=ast.Constant(OPERATOR_NAMES[type(node.op)]))


def transform(node, ctx):
    return AugmentedAssignmentTransformer(ctx).visit(node)
