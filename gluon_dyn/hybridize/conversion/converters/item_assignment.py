"""Converter: `x[key] = value` becomes `x = ag__.set_item(x, key, value, why)`.

A traced array is an immutable Symbol: NDArray's item assignment becomes a new
Symbol (operators/item_assignment.py), which the assignment hands to the object
standing for the array where it can (every holder sees it) and to the name `x`
in any case. Rebinding the name is also what lets malt's analyses see that the
assignment changes `x`, so that a graph branch or loop carries it. `self.a[k] = v`
rebinds the attribute; a target that is neither a name nor an attribute
(`a[i][j] = v`, `f()[k] = v`) is left to the object alone.

`why` says when rebinding the name alone would not give what imperative code
sees, should the object not be able to change (the body of a graph branch or
loop assigning into a value from outside it): when, in the function as written,
the name's array may also be held elsewhere: it is a parameter (the caller holds
it), a loop variable (a row of the sequence), set from another name, attribute or
item (`x = y`, `x = self.h`, `x = rows[0]`) or from a method giving the array
itself or a view of it (`x = y.reshape(...)`), or stored: put in a list, tuple or
dict, assigned to another name, attribute or item, or appended (`h.append(x)`).
Calls are taken not to keep their arguments, as operators and layers do not.
`analyze` finds this on the function's own source, before malt rewrites it
(transpiler.py), and the runtime operator refuses where it matters.
"""
import ast

from malt.pyct import anno, origin_info, templates

from .augmented_assignment import OPERATOR_NAMES
from .subscripts import key_expression

# Methods of arrays that return the array itself or a view of its memory, and of
# containers that keep what they are given.
_ALIASING_METHODS = frozenset({"reshape", "detach", "as_in_context", "as_in_ctx", "astype",
                               "copyto", "expand_dims", "flatten", "squeeze", "view"})
_STORING_METHODS = frozenset({"append", "extend", "insert", "add", "update", "setdefault",
                              "__setitem__"})
_ATTRIBUTE = "it is an attribute, which other code may hold too"
_NOT_A_NAME = "its target `%s` is not a name converted code can rebind"


def analyze(function):
    """Why each name of `function` (its AST, as written) may share its array with
    another holder: {name: reason}."""
    reasons = {}

    def note(name, reason):
        reasons.setdefault(name, reason)

    for argument in ast.walk(function.args) if hasattr(function, "args") else ():
        if isinstance(argument, ast.arg):
            note(argument.arg, "it is a parameter, which the caller holds too")
    for node in ast.walk(function):
        line = _line(node)
        if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            for name in _names(node.target):
                note(name, "it is a loop variable (line %s), a row of the sequence" % line)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            for name in _names(node.optional_vars):
                note(name, "it is bound by `with ... as` (line %s)" % line)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:
                note(name, "it is declared %s" % type(node).__name__.lower())
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            _note_assignment(targets, node.value, line, note)
        elif isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict)) and \
                isinstance(node.ctx if hasattr(node, "ctx") else ast.Load(), ast.Load):
            for value in (node.values if isinstance(node, ast.Dict) else node.elts):
                for name in _names(value):
                    note(name, "it is put in a container at line %s" % line)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in _STORING_METHODS:
            for value in node.args:
                for name in _names(value):
                    note(name, "it is stored by `.%s()` at line %s" % (node.func.attr, line))
    for node in ast.walk(function):   # `return a, b` hands the values on and ends
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple):
            for name in _names(node.value):
                if reasons.get(name, "").startswith("it is put in a container"):
                    del reasons[name]
    return reasons


def _line(node):
    """The line of `node` in its file (malt resolved each node's origin in the file)."""
    origin = anno.getanno(node, anno.Basic.ORIGIN, default=None)
    return origin.loc.lineno if origin is not None else getattr(node, "lineno", "?")


def _note_assignment(targets, value, line, note):
    if value is None:
        return
    for target in targets:
        if isinstance(target, ast.Name):
            if _aliases(value):
                note(target.id, "it is set from another array's holder (`%s`, line %s)"
                     % (ast.unparse(value), line))
        elif isinstance(target, (ast.Tuple, ast.List, ast.Starred)):
            for name in _names(target):
                note(name, "it is unpacked from another value (line %s)" % line)
        if not isinstance(target, ast.Name) or isinstance(value, ast.Name):
            for name in _names(value) if _aliases(value) or isinstance(value, ast.Name) \
                    else ():
                note(name, "it is also assigned to `%s` (line %s)" % (ast.unparse(target), line))


def _aliases(value):
    """Whether the expression `value` may give an existing array (not a new one)."""
    if isinstance(value, (ast.Name, ast.Attribute, ast.Subscript, ast.Starred, ast.IfExp,
                          ast.BoolOp, ast.NamedExpr)):
        return True
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and \
        value.func.attr in _ALIASING_METHODS


def _names(node):
    """The names `node` is (a name, or a tuple, list or starred of names)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Starred):
        return _names(node.value)
    if isinstance(node, (ast.Tuple, ast.List)):
        return [name for element in node.elts for name in _names(element)]
    return []


class ItemAssignmentTransformer(ast.NodeTransformer):
    """Runs on the function as written, before malt (transpiler.py)."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.functions = []   # per enclosing function: (its local names, analyze's reasons)

    def visit_FunctionDef(self, node):
        self.functions.append((_local_names(node), analyze(node)))
        node = self.generic_visit(node)
        self.functions.pop()
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Assign(self, node):
        node = self.generic_visit(node)
        if not self.functions or not any(_holds_item_target(target) for target in node.targets):
            return node
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript):
            return _located(self._assigned(node.targets[0], node.value), node)
        # `a[i] = b = v`, `a[i], b = v`: the value once, then each target.
        value = self._fresh("item_value", node)
        statements = [ast.Assign(targets=[ast.Name(id=value, ctx=ast.Store())], value=node.value)]
        for target in node.targets:
            statements.extend(self._unpacked_into(target, value, node))
        return _located(statements, node)

    def visit_AugAssign(self, node):
        """`x[k] op= v`: x[k] read, `op=` applied (in place where Python would),
        assigned back; the key computed once."""
        node = self.generic_visit(node)
        if not self.functions or not isinstance(node.target, ast.Subscript):
            return node
        statements, key = [], node.target.slice
        if not _simple(key):
            name = self._fresh("item_key", node)
            statements.append(ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())],
                                         value=_key(key)))
            key = ast.Name(id=name, ctx=ast.Load())
        read = ast.Subscript(value=node.target.value, slice=key, ctx=ast.Load())
        value = templates.replace_as_expression(
            "ag__.augmented_assign(read, value, operator_name)", read=read, value=node.value,
            operator_name=ast.Constant(OPERATOR_NAMES[type(node.op)]))
        target = ast.Subscript(value=node.target.value, slice=key, ctx=ast.Store())
        statements.extend(self._assigned(target, value))
        return _located(statements, node)

    def _unpacked_into(self, target, value, node):
        if isinstance(target, ast.Subscript):
            return self._assigned(target, ast.Name(id=value, ctx=ast.Load()))
        if not _holds_item_target(target):
            return [ast.Assign(targets=[target], value=ast.Name(id=value, ctx=ast.Load()))]
        # A tuple or list target holding items: names in their place, then each item.
        later = []

        def placed(element):
            if isinstance(element, ast.Starred):
                return ast.Starred(value=placed(element.value), ctx=ast.Store())
            if _holds_item_target(element):
                name = self._fresh("item_value", node)
                later.append((element, name))
                return ast.Name(id=name, ctx=ast.Store())
            return element
        unpacking = type(target)(elts=[placed(element) for element in target.elts],
                                 ctx=ast.Store())
        statements = [ast.Assign(targets=[unpacking], value=ast.Name(id=value, ctx=ast.Load()))]
        for element, name in later:
            statements.extend(self._unpacked_into(element, name, node))
        return statements

    def _assigned(self, target, value):
        key = _key(target.slice)
        holder = target.value
        local_names, reasons = self.functions[-1]
        if isinstance(holder, ast.Name) and holder.id in local_names:
            why = reasons.get(holder.id)
        elif _is_attribute_chain(holder):
            why = _ATTRIBUTE
        else:
            why = _NOT_A_NAME % ast.unparse(holder) if not isinstance(holder, ast.Name) else \
                "it is a variable of the module or of an enclosing function"
            return templates.replace("ag__.set_item(holder, key, value, why)", holder=holder,
                                     key=key, value=value, why=ast.Constant(why))
        return templates.replace("holder = ag__.set_item(holder, key, value, why)",
                                 holder=holder, key=key, value=value, why=ast.Constant(why))

    def _fresh(self, root, node):
        reserved = {each.id for each in ast.walk(node) if isinstance(each, ast.Name)}
        return self.ctx.namer.new_symbol(root, reserved)


def _key(key):
    # `ag__.item_slice` is the builtin slice, called as it is: malt converts the
    # calls it meets, and would convert `slice(...)`.
    return key_expression(key, slice_type="ag__.item_slice")


def _located(statements, node):
    """`statements`, replacing `node`, at its place in the source (errors and graph
    breaks name the user's line)."""
    for statement in statements:
        ast.copy_location(statement, node)
        ast.fix_missing_locations(statement)
    origin_info.copy_origin(node, statements)
    return statements


def _simple(key):
    """A key whose evaluation has no effect and is cheap to repeat."""
    return all(isinstance(each, (ast.Name, ast.Constant, ast.Load, ast.Tuple, ast.Slice,
                                 ast.Attribute, ast.UnaryOp, ast.USub, ast.UAdd))
               for each in ast.walk(key))


def _local_names(function):
    """The names local to `function` (parameters, names it assigns, and those it
    declares global or nonlocal), not counting functions nested in it."""
    names = {arg.arg for arg in ast.walk(function.args) if isinstance(arg, ast.arg)}
    pending = list(function.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif not isinstance(node, ast.Lambda):
            pending.extend(ast.iter_child_nodes(node))
    return names


def _holds_item_target(target):
    if isinstance(target, ast.Subscript):
        return True
    if isinstance(target, (ast.Tuple, ast.List)):
        return any(_holds_item_target(element) for element in target.elts)
    return isinstance(target, ast.Starred) and _holds_item_target(target.value)


def _is_attribute_chain(node):
    """`self.a`, `a.b.c`: an attribute reached from a name through attributes only."""
    if not isinstance(node, ast.Attribute):
        return False
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def transform(node, ctx):
    """`node` (a function as written) with its item assignments rewritten; run before
    malt, whose analyses then see that each rebinds its name."""
    return ItemAssignmentTransformer(ctx).visit(node)
