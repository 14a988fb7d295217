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
# A part that runs as Python returns (RETURNED, value) where the forward returns,
# else (LIVE, the values of the variables later parts read); a variable it leaves
# unassigned comes out as UNBOUND, which raises as Python would once it is used.
RETURNED, LIVE = "__gluon_dyn_returned__", "__gluon_dyn_live__"


class Unbound:
    def __init__(self, name):
        self.name = name

    def _raise(self, *args):
        raise UnboundLocalError("local variable '%s' referenced before assignment" % self.name)

    __getattr__ = __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _raise
    __truediv__ = __bool__ = __len__ = __iter__ = __getitem__ = __call__ = _raise


class CannotSplit(Exception):
    """The forward cannot be split there; it runs as Python, as before."""


@dataclasses.dataclass
class Part:
    """One piece of a split forward: `function(self, *live_in)` returns the values
    of `live_out` (a tuple), or, for the last part, what the forward returns.
    `breaking`: it runs as Python and returns (RETURNED, value) or (LIVE, values)."""
    function: types.FunctionType
    live_in: tuple
    live_out: tuple
    breaking: bool


def split(function, location):
    """The parts of `function` (a forward method) around the top-level statement at
    `location` ("file:line"), in order; CannotSplit says why not.

    The statements before the break form a graph part unless one of them may
    return or leaves a variable later read maybe unassigned: then they run as
    Python with the breaking statement."""
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
    before, breaking, after = body[:index], [body[index]], body[index + 1:]
    params = _parameters(definition.args)
    if before and (_returns(before) or _unsure(definition.args, before, breaking + after)):
        before, breaking = [], before + breaking
    pieces = [(stmts, python) for stmts, python in ((before, False), (breaking, True),
                                                     (after, False)) if stmts]
    if len(pieces) == 1:
        raise CannotSplit("the whole forward is the statement that must run as Python")
    self_name, defined = params[0], set(params)
    parts = []
    for position, (stmts, python) in enumerate(pieces):
        last = position == len(pieces) - 1
        live_in = tuple(sorted(_loaded(stmts + _rest(pieces, position)) & defined - {self_name}))
        defined |= _assigned(stmts)
        live_out = () if last else tuple(sorted(
            _loaded(_rest(pieces, position + 1)) & (defined - {self_name})))
        compiled = _compile(function, filename, lines, first, definition, stmts,
                            None if position == 0 else live_in, live_out, last, python)
        parts.append(Part(compiled, () if position == 0 else live_in, live_out, python))
    return parts


def _unsure(arguments, stmts, rest):
    """Whether a variable `rest` reads before assigning it may be unassigned after `stmts`."""
    defined = set(_parameters(arguments)) | _assigned(stmts)
    return bool((_read_first(rest) & defined) - _surely_assigned(arguments, stmts))


def _read_first(stmts):
    """Names `stmts` may read before they assign them (a top-level loop's own target,
    or a variable a top-level assignment sets first, is not)."""
    read, assigned = set(), set()
    for stmt in stmts:
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            read |= _loaded([stmt.iter]) - assigned
            targets = _names([stmt.target], ast.Store)
            read |= _loaded(stmt.body + stmt.orelse) - assigned - targets
            assigned |= targets
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            read |= _loaded([stmt]) - assigned
            assigned |= _names([stmt], ast.Store)
        else:
            read |= _loaded([stmt]) - assigned
    return read


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


def _surely_assigned(arguments, stmts):
    """Names certainly bound after `stmts`: parameters, and targets of top-level
    assignments (not those only inside a branch or loop)."""
    return set(_parameters(arguments)) | _names(
        [stmt for stmt in stmts if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign))],
        ast.Store)


def _returns(stmts):
    return bool(_return_nodes(stmts))


def _return_nodes(stmts):
    """The forward's own `return` statements among `stmts` (not nested functions')."""
    found, pending = [], list(stmts)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Return):
            found.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                 ast.ClassDef)):
            pending.extend(ast.iter_child_nodes(node))
    return found


def _compile(function, filename, lines, first, definition, stmts, live_in, live_out, last,
             python):
    """A function of `stmts`, their source lines kept at their line numbers (so that
    converted code and errors name the user's lines)."""
    start, end = stmts[0].lineno, stmts[-1].end_lineno
    body = lines[start - first:end - first + 1]
    if python and not last:
        # Column offsets count from the dedented source the AST was parsed from.
        shift = len(lines[0]) - len(lines[0].lstrip())
        body = _marking_returns(body, start, shift, stmts)
    if live_in is None:
        signature = ast.unparse(definition.args)
    else:
        signature = ", ".join([_parameters(definition.args)[0]] + list(live_in))
    if python and not last:
        signature += ("," if signature else "") + " *, __gluon_dyn_unbound__=None"
    name = "%s__part%d" % (function.__name__, next(_parts))
    source_lines = ["\n"] * (start - 2) + ["def %s(%s):\n" % (name, signature)] + body
    body_line = lines[start - first]
    indent = body_line[:len(body_line) - len(body_line.lstrip())]
    if python and not last:
        values = "".join("%s if %r in locals() else __gluon_dyn_unbound__(%r), " % (v, v, v)
                         for v in live_out)
        source_lines.append("%sreturn (%r, (%s))\n" % (indent, LIVE, values))
    elif not last:
        source_lines.append("%sreturn (%s)\n" % (indent, "".join("%s, " % v for v in live_out)))
    source = "".join(source_lines)
    part_file = "<gluon_dyn %s of %s:%d>" % (name, filename, first)
    linecache.cache[part_file] = (len(source), None, source.splitlines(True), part_file)
    origin.register_alias(part_file, filename)
    namespace = {}
    exec(compile(source, part_file, "exec"), dict(function.__globals__), namespace)
    compiled = types.FunctionType(namespace[name].__code__, function.__globals__, name,
                                  namespace[name].__defaults__)
    if python and not last:
        compiled.__kwdefaults__ = {"__gluon_dyn_unbound__": Unbound}
    return compiled


def _marking_returns(body, start, shift, stmts):
    """`body` (source lines from line `start`; AST columns `shift` to the left) with
    each `return X` of the forward made `return (RETURNED, X)`, on the same lines."""
    body = list(body)
    for node in sorted(_return_nodes(stmts), key=lambda n: (n.lineno, n.col_offset),
                       reverse=True):
        first, last = node.lineno - start, node.end_lineno - start
        head = body[first][:node.col_offset + shift]
        tail = body[last][node.end_col_offset + shift:]
        value = "None" if node.value is None else _span(body, start, shift, node.value)
        # The value keeps its own line breaks; the lines it spanned stay, emptied.
        body[first:last + 1] = [head + "return (%r, %s)" % (RETURNED, value) + tail] + \
            [""] * (last - first)
    return body


def _span(body, start, shift, node):
    """The source text of `node` in `body`."""
    first, last = node.lineno - start, node.end_lineno - start
    begin, end = node.col_offset + shift, node.end_col_offset + shift
    if first == last:
        return body[first][begin:end]
    return body[first][begin:] + "".join(body[first + 1:last]) + body[last][:end]
