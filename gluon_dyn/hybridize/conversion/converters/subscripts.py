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
                                               key=key_expression(node.slice))


def transform(node, ctx):
    return SubscriptTransformer(ctx).visit(node)


def key_expression(key, slice_type="slice"):
    """A subscript's key as an ordinary expression: `a:b:c` becomes `slice(a, b, c)`
    (`slice_type`: how the code names the builtin)."""
    if isinstance(key, ast.Slice):
        bounds = [bound if bound is not None else ast.Constant(None)
                  for bound in (key.lower, key.upper, key.step)]
        return ast.Call(func=ast.parse(slice_type, mode="eval").body, args=bounds, keywords=[])
    if isinstance(key, ast.Tuple):
        return ast.Tuple(elts=[key_expression(element, slice_type) for element in key.elts],
                         ctx=ast.Load())
    return key
