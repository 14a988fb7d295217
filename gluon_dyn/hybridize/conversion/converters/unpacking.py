"""Converter: where Python unpacks a value, `ag__.unpacked(value)` is unpacked.

`a, b = x`, `f(*x)`, `[*x, y]` unpack an NDArray into its rows; traced, `x` is a
Symbol, which Python would unpack into its outputs (one). The runtime operator
gives the rows of a Symbol standing for an array in code written for NDArrays
(operators/builtins.py) and passes anything else on. Runs after malt, whose own
unpacking of starred call arguments (`tuple(x)`) and of loop targets (`a, b =
itr` in a loop body) it covers too.
"""
import ast

from malt.core import converter
from malt.pyct import templates


class UnpackingTransformer(converter.Base):

    def visit_Assign(self, node):
        node = self.generic_visit(node)
        if any(isinstance(target, (ast.Tuple, ast.List)) for target in node.targets):
            node.value = _unpacked(node.value)
        return node

    def visit_Starred(self, node):
        node = self.generic_visit(node)
        if isinstance(node.ctx, ast.Load):
            node.value = _unpacked(node.value)
        return node

    def visit_Call(self, node):
        node = self.generic_visit(node)
        # malt passes starred call arguments as `tuple(x)` (a call of its own, not
        # converted: the user's calls all become ag__.converted_call).
        if isinstance(node.func, ast.Name) and node.func.id == "tuple" and \
                len(node.args) == 1 and not node.keywords:
            node.args = [_unpacked(node.args[0])]
        return node


def _unpacked(value):
    return templates.replace_as_expression("ag__.unpacked(value)", value=value)


def transform(node, ctx):
    return UnpackingTransformer(ctx).visit(node)
