"""Converter: a `global` or `nonlocal` declaration reaches the functions malt nests.

malt turns the bodies of `if` and loops into nested functions (`if_body`,
`loop_body`). An assignment to a variable the converted function declared
`global X` (or `nonlocal X`) then sits in a nested function that lacks the
declaration, and binds a local of that function instead: the module variable is
silently left as it was. The declaration is repeated in every nested function
that assigns the name and does not bind it itself (as a parameter, or by its own
declaration).
"""
import ast

from malt.core import converter


class GlobalDeclarationTransformer(converter.Base):

    def __init__(self, ctx):
        super().__init__(ctx)
        self._declared = [{}]     # per enclosing function: name -> ast.Global or ast.Nonlocal

    def visit_FunctionDef(self, node):
        inherited = self._declared[-1]
        own_nodes = list(_own_nodes(node))
        own = {name: type(statement) for statement in own_nodes
               if isinstance(statement, (ast.Global, ast.Nonlocal)) for name in statement.names}
        parameters = {arg.arg for arg in ast.walk(node.args) if isinstance(arg, ast.arg)}
        assigned = {each.id for each in own_nodes
                    if isinstance(each, ast.Name) and isinstance(each.ctx, (ast.Store, ast.Del))}
        missing = sorted(name for name in assigned
                         if name in inherited and name not in own and name not in parameters)
        for kind in (ast.Global, ast.Nonlocal):
            names = [name for name in missing if inherited[name] is kind]
            if names:
                node.body.insert(0, kind(names=names))
        self._declared.append({**inherited, **own,
                               **{name: inherited[name] for name in missing}})
        node = self.generic_visit(node)
        self._declared.pop()
        return node


def _own_nodes(function):
    """The nodes of `function`'s body outside the functions and classes nested in it."""
    pending = list(function.body)
    while pending:
        node = pending.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                 ast.ClassDef)):
            pending.extend(ast.iter_child_nodes(node))


def transform(node, ctx):
    return GlobalDeclarationTransformer(ctx).visit(node)
