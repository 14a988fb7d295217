"""Graph breaks: a forward split around a statement that must run as Python.

When a trace stops at a host read (`.asscalar()`, `.asnumpy()`, `float(x)`), a
`print` or a `with` block, the forward's source is split at the top-level
statement holding it, as PyTorch Dynamo splits bytecode at a graph break: the
statements before it, the statement itself and the statements after it become
three functions, each taking the variables the earlier ones defined and later
ones read, and returning those the next one needs. The runner runs the parts
before and after as graph segments, each with a runner of its own (cache, guards,
speculation, all-or-nothing state writes), and the statement itself as Python
with real values. A part that breaks again is split again when its own trace
stops. Each part is compiled from the original source lines (a file of its own,
registered with linecache, lines where they were), so converted code reports the
user's file:line.
"""
import ast
import dataclasses
import inspect
import itertools
import linecache
import textwrap
import types

from .. import origin

_parts = itertools.count()


class CannotSplit(Exception):
    """The forward cannot be split there; it runs as Python, as before."""


@dataclasses.dataclass
class Part:
    """One piece of a split forward: `function(self, *live_in)` returns the values
    of `live_out` (a tuple), or, for the last part, what the forward returns.
    `breaking`: the statement that runs as Python."""
    function: types.FunctionType
    live_in: tuple
    live_out: tuple
    breaking: bool


def split(function, location):
    """The parts of `function` (a forward method) around the top-level statement at
    `location` ("file:line"), in order; CannotSplit says why not."""
    if function.__code__.co_freevars:
        raise CannotSplit("the forward uses variables of an enclosing function (%s)"
                          % ", ".join(function.__code__.co_freevars))
    try:
        lines, first = inspect.getsourcelines(function)
    except (OSError, TypeError) as error:
        raise CannotSplit("the forward's source is not available (%s)" % error) from None
    filename = inspect.getsourcefile(function)
    tree = ast.parse(textwrap.dedent("".join(lines)))
    ast.increment_lineno(tree, first - 1)
    definition = tree.body[0]
    line = _line_in(filename, location)
    body = definition.body
    index = next((k for k, stmt in enumerate(body)
                  if stmt.lineno <= line <= stmt.end_lineno), None)
    if index is None:
        raise CannotSplit("the statement at %s is not in the forward's body" % location)
    pieces = [(body[:index], False), ([body[index]], True), (body[index + 1:], False)]
    pieces = [(stmts, breaking) for stmts, breaking in pieces if stmts]
    if len(pieces) == 1:
        raise CannotSplit("the whole forward is the statement that must run as Python")
    params = _parameters(definition.args)
    self_name = params[0]
    defined = set(params)
    parts = []
    for position, (stmts, breaking) in enumerate(pieces):
        last = position == len(pieces) - 1
        if not last and _returns(stmts):
            raise CannotSplit("a `return` before the break at %s" % location)
        live_in = tuple(sorted(_loaded(stmts + _rest(pieces, position)) & defined - {self_name}))
        defined |= _assigned(stmts)
        live_out = () if last else tuple(sorted(
            _loaded(_rest(pieces, position + 1)) & (defined - {self_name})))
        unsure = set(live_out) - _surely_assigned(definition.args, pieces[:position + 1])
        if unsure:
            raise CannotSplit("%s may be unassigned at the break at %s"
                              % (", ".join(sorted(unsure)), location))
        if position == 0:
            live_in = None   # the first part keeps the forward's own signature
        parts.append(Part(_compile(function, filename, lines, first, definition, stmts,
                                   live_in, live_out, last), live_in or (), live_out, breaking))
    return parts


def _line_in(filename, location):
    path, _, line = location.rpartition(":")
    if origin.real_filename(path) != origin.real_filename(filename) or not line.isdigit():
        raise CannotSplit("the statement at %s is not in the forward (%s)" % (location, filename))
    return int(line)


def _rest(pieces, position):
    return [stmt for stmts, _ in pieces[position:] for stmt in stmts]


def _parameters(arguments):
    names = [a.arg for a in arguments.posonlyargs + arguments.args]
    names += [a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None]
    return names + [a.arg for a in arguments.kwonlyargs]


def _names(stmts, context):
    return {node.id for stmt in stmts for node in ast.walk(stmt)
            if isinstance(node, ast.Name) and isinstance(node.ctx, context)}


def _loaded(stmts):
    return _names(stmts, ast.Load)


def _assigned(stmts):
    names = _names(stmts, (ast.Store, ast.Del))
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
    return names


def _surely_assigned(arguments, pieces):
    """Names certainly bound after `pieces`: parameters, and targets of top-level
    assignments (not those only inside a branch or loop)."""
    names = set(_parameters(arguments))
    for stmts, _ in pieces:
        names |= _names([stmt for stmt in stmts
                         if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign))],
                        ast.Store)
    return names


def _returns(stmts):
    return any(isinstance(node, ast.Return) for stmt in stmts for node in ast.walk(stmt))


def _compile(function, filename, lines, first, definition, stmts, live_in, live_out, last):
    """A function of `stmts`, their source lines kept at their line numbers."""
    start, end = stmts[0].lineno, stmts[-1].end_lineno
    source_lines = ["\n"] * (start - 2)
    if live_in is None:
        signature = ast.unparse(definition.args)
    else:
        signature = ", ".join((_parameters(definition.args)[0],) + live_in)
    name = "%s__part%d" % (function.__name__, next(_parts))
    source_lines.append("def %s(%s):\n" % (name, signature))
    source_lines += lines[start - first:end - first + 1]
    body_line = lines[start - first]
    indent = body_line[:len(body_line) - len(body_line.lstrip())]
    if not last:
        source_lines.append("%sreturn (%s)\n" % (indent, "".join("%s, " % v for v in live_out)))
    source = "".join(source_lines)
    part_file = "<gluon_dyn %s of %s:%d>" % (name, filename, first)
    linecache.cache[part_file] = (len(source), None, source.splitlines(True), part_file)
    origin.register_alias(part_file, filename)
    namespace = {}
    exec(compile(source, part_file, "exec"), function.__globals__.copy(), namespace)
    compiled = namespace[name]
    return types.FunctionType(compiled.__code__, function.__globals__, name,
                              compiled.__defaults__)
