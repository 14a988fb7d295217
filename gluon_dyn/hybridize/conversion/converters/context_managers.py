"""Converter: `with m:` becomes `with ag__.entered_context(m):`.

Entering and leaving a context manager are Python side effects that a graph
cannot replay on the next call, so while a graph is traced the runtime operator
stops the trace and the function runs as Python (operators/calls.py).
"""
import ast

from malt.core import converter
from malt.pyct import templates


class ContextManagerTransformer(converter.Base):

    def visit_With(self, node):
        node = self.generic_visit(node)
        for item in node.items:
            if not _is_malt_scope(item.context_expr):
                item.context_expr = templates.replace_as_expression(
                    "ag__.entered_context(manager)", manager=item.context_expr)
        return node


def _is_malt_scope(expression):
    # malt wraps every converted function body in `with ag__.FunctionScope(...)`.
    return (isinstance(expression, ast.Call) and isinstance(expression.func, ast.Attribute)
            and expression.func.attr == "FunctionScope")


def transform(node, ctx):
    return ContextManagerTransformer(ctx).visit(node)
