"""Converter: reading `x[key]` becomes `ag__.get_item(x, key)`.

Imperative code indexes NDArrays (`seq[t]` is row t); on a Symbol the same
syntax selects an output. The runtime operator gives Symbols traced from
NDArray code NDArray indexing semantics (operators/subscripts.py).
"""
import ast

from malt.core import converter
from malt.pyct import templates


class SubscriptTransformer(converter.Base):

    def visit_Subscript(self, node):
        node = self.generic_visit(node)
        if not isinstance(node.ctx, ast.Load):
            return node
        return templates.replace_as_expression("ag__.get_item(target, key)", target=node.value,
                                               key=node.slice)


def transform(node, ctx):
    return SubscriptTransformer(ctx).visit(node)
