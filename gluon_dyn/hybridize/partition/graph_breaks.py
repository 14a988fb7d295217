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

A break inside a function the forward calls (a helper, a method, a child block)
splits the forward at the top-level statement whose call led there: that
statement runs as Python. A HybridBlock's hybrid_forward is split the same way;
MXNet's HybridBlock.forward gives it `F` and the block's parameters, which each
part binds again in its first line (a HybridScope: mx.nd and the parameters'
arrays as Python runs it, mx.sym and their Symbols while it is traced), so they
never pass between parts.
"""
import ast
import dataclasses
import inspect
import itertools
import linecache
import re
import textwrap
import types

import mxnet as mx
from mxnet import gluon

from ... import origin
from ..capturing.unbound import Unbound

_parts = itertools.count()
# A part that runs as Python returns (RETURNED, value) where the forward returns,
# else (LIVE, the values of the variables later parts read); a variable it leaves
# unassigned comes out as UNBOUND, which raises as Python would once it is used.
RETURNED, LIVE = "__gluon_dyn_returned__", "__gluon_dyn_live__"
# The keyword-only parameter of a HybridBlock's parts holding their HybridScope.
HYBRID = "__gluon_dyn_hybrid__"
UNBOUND = "__gluon_dyn_unbound__"


class CannotSplit(Exception):
    """The forward cannot be split there; it runs as Python, as before."""


@dataclasses.dataclass
class Part:
    """One piece of a split forward: `function(self, *live_in)` returns the values
    of `live_out` (a tuple), or, for the last part, what the forward returns.
    `breaking`: it runs as Python. `marked`: it returns (RETURNED, value) where the
    forward returns, else (LIVE, values): every part but the last that runs as
    Python, and a graph part before the break holding a `return` (a model's
    `if autograd.is_training(): return ...` before its post-processing)."""
    function: types.FunctionType
    live_in: tuple
    live_out: tuple
    breaking: bool
    marked: bool = False


class HybridScope:
    """What MXNet's HybridBlock.forward gives a hybrid_forward besides the arguments,
    bound again in each part of a split one: `F` and the block's parameters (by the
    names of hybrid_forward's parameters, the others in its `**kwargs`). Called as
    `scope(block, live values)`, it gives their values in `names` order."""

    def __init__(self, block, function):
        signature = inspect.signature(function)
        parameters = list(signature.parameters.values())
        if len(parameters) < 2:
            raise CannotSplit("hybrid_forward takes no `F`")
        registered = set(block._reg_params)   # pylint: disable=protected-access
        self.parameters = tuple(p.name for p in parameters[2:] if p.name in registered and
                                p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        self.kwargs = next((p.name for p in parameters if p.kind == p.VAR_KEYWORD), None)
        self.names = (parameters[1].name,) + self.parameters + \
            ((self.kwargs,) if self.kwargs else ())

    def __call__(self, block, live):
        arrays = _arrays(live)
        symbolic = any(isinstance(array, mx.sym.Symbol) for array in arrays)
        registered = block._reg_params   # pylint: disable=protected-access
        if symbolic:
            F, params = mx.sym, {name: p.var() for name, p in registered.items()}
        else:
            context = next((array.context for array in arrays), None) or \
                mx.context.current_context()
            F, params = mx.nd, {name: p.data(context) for name, p in registered.items()}
        values = (F,) + tuple(params[name] for name in self.parameters)
        if self.kwargs:
            values += ({name: value for name, value in params.items()
                        if name not in self.parameters},)
        return values


def _arrays(value):
    """The arrays and Symbols in `value`, nested in lists and tuples, in order."""
    if isinstance(value, (mx.nd.NDArray, mx.sym.Symbol)):
        return [value]
    if isinstance(value, (list, tuple)):
        return [array for item in value for array in _arrays(item)]
    return []


def split_runner(block, function, converted, error):
    """The parts of what a runner of `block` runs (`function`, converted as
    `converted`) around the graph break `error`; CannotSplit says why not. A
    HybridBlock's own forward is MXNet's, which calls hybrid_forward: that is split."""
    hybrid = None
    if isinstance(block, gluon.HybridBlock) and function is type(block).forward:
        function = type(block).hybrid_forward
        converted = getattr(vars(block).get("hybrid_forward"), "function", None)
        if converted is None:
            raise CannotSplit("%s's hybrid_forward is MXNet's own" % type(block).__name__)
        hybrid = HybridScope(block, function)
    return split(function, statement_location(error, converted.__code__), hybrid)


def statement_location(error, code):
    """Where, in the function whose converted code is `code`, the statement that led
    to `error` is (a line inside the top-level statement to split at), or where the
    error says it happened if that function is not on the traceback.

    The converted function runs its `if`, `for` and `while` bodies, and the rest of
    it after a loop that may return, as functions of its own (malt's if_body,
    loop_body, ...): the innermost frame of those below its outermost frame is
    the line; a frame of the function itself again is a recursive call, below it."""
    bodies, found = _body_codes(code), None
    traceback = error.__traceback__
    while traceback is not None:
        frame_code = traceback.tb_frame.f_code
        if frame_code is code and found is not None:
            break
        if frame_code is code or (found is not None and frame_code in bodies):
            found = origin.code_location(frame_code, traceback.tb_lineno)
        traceback = traceback.tb_next
    return found or error.location


_BODY = re.compile(r"(if_body|else_body|loop_body|loop_test|extra_test)(_\d+)?$")


def _body_codes(code):
    """The code of the control-flow bodies malt makes of `code`'s statements, nested."""
    found, pending = set(), [code]
    while pending:
        for constant in pending.pop().co_consts:
            if isinstance(constant, types.CodeType) and _BODY.match(constant.co_name):
                found.add(constant)
                pending.append(constant)
    return found


def split(function, location, hybrid=None):
    """The parts of `function` (a forward method, or a part of one) around the
    top-level statement at `location` ("file:line"), in order; CannotSplit says why
    not. `hybrid`: the HybridScope of a HybridBlock's hybrid_forward (a part of one
    holds its own).

    The statements before the break form a graph part unless one of them leaves a
    variable later read maybe unassigned: then they run as Python with the breaking
    statement. A graph part that may return says whether it did, as a part that runs
    as Python does (Part.marked)."""
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
    body, ambient = definition.body, set()
    if hybrid is None and HYBRID in (function.__kwdefaults__ or {}):
        hybrid = function.__kwdefaults__[HYBRID]
        body = body[1:]   # the part's first line binds F and the parameters
    if hybrid is not None:
        ambient = set(hybrid.names)
        if _assigned(body) & ambient:
            raise CannotSplit("hybrid_forward assigns %s, which MXNet gives it"
                              % ", ".join(sorted(_assigned(body) & ambient)))
    index = next((k for k, stmt in enumerate(body)
                  if stmt.lineno <= line <= stmt.end_lineno), None)
    if index is None:
        raise CannotSplit("the statement at %s is not in the forward's body" % location)
    before, breaking, after = body[:index], [body[index]], body[index + 1:]
    params = _parameters(definition.args)
    if before and _unsure(definition.args, before, breaking + after):
        before, breaking = [], before + breaking
    pieces = [(stmts, python) for stmts, python in ((before, False), (breaking, True),
                                                     (after, False)) if stmts]
    if len(pieces) == 1:
        raise CannotSplit("the whole forward is the statement that must run as Python")
    self_name, defined = params[0], set(params) - ambient - {HYBRID}
    parts, live_in = [], ()
    for position, (stmts, python) in enumerate(pieces):
        last = position == len(pieces) - 1
        defined |= _assigned(stmts)
        # What the later parts read before they assign it (a variable they assign
        # first is theirs: this part may leave it unassigned).
        live_out = () if last else tuple(sorted(
            _read_first(_rest(pieces, position + 1)) & (defined - {self_name})))
        marked = not last and (python or _returns(stmts))
        compiled = _compile(function, filename, lines, first, definition, stmts,
                            None if position == 0 else live_in, None if last else live_out,
                            python, marked, hybrid)
        parts.append(Part(compiled, () if position == 0 else live_in, live_out, python, marked))
        live_in = live_out
    return parts


def _unsure(arguments, stmts, rest):
    """Whether a variable `rest` reads before assigning it may be unassigned after `stmts`."""
    defined = set(_parameters(arguments)) | _assigned(stmts)
    return bool((_read_first(rest) & defined) - _surely_assigned(arguments, stmts))


def _read_first(stmts, assigned=frozenset()):
    """Names `stmts` may read before they assign them, `assigned` being set already:
    a loop's own target read in its body is not, nor a variable an assignment sets
    before the statements after it read it; a loop's or a branch's assignments may
    not happen."""
    read, assigned = set(), set(assigned)
    for stmt in stmts:
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            read |= _loaded([stmt.iter]) - assigned
            read |= _read_first(stmt.body, assigned | _names([stmt.target], ast.Store))
            read |= _read_first(stmt.orelse, assigned)
        elif isinstance(stmt, (ast.While, ast.If)):
            read |= _loaded([stmt.test]) - assigned
            read |= _read_first(stmt.body, assigned) | _read_first(stmt.orelse, assigned)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            read |= _loaded(stmt.items) - assigned
            read |= _read_first(stmt.body, assigned | _names(stmt.items, ast.Store))
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            read |= _loaded([stmt]) - assigned
            assigned |= _names([stmt], ast.Store)
        elif isinstance(stmt, ast.AugAssign):    # `x += 1` reads x
            read |= (_loaded([stmt]) | _names([stmt.target], ast.Store)) - assigned
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


def _compile(function, filename, lines, first, definition, stmts, live_in, live_out, python,
             marked, hybrid):
    """A function of `stmts`, their source lines kept at their line numbers (so that
    converted code and errors name the user's lines); with `hybrid` (a HybridScope),
    its line before them binds F and the parameters. `live_out` None: the last part,
    returning what the forward returns."""
    start, end = stmts[0].lineno, stmts[-1].end_lineno
    body = lines[start - first:end - first + 1]
    if marked:
        # Column offsets count from the dedented source the AST was parsed from.
        shift = len(lines[0]) - len(lines[0].lstrip())
        body = _marking_returns(body, start, shift, stmts)
    if live_in is None:
        arguments = definition.args if hybrid is None else \
            _without(definition.args, set(hybrid.names) | {HYBRID, UNBOUND})
        signature = ast.unparse(arguments)
        passed = _parameters(arguments)[1:]
    else:
        signature = ", ".join([_parameters(definition.args)[0]] + list(live_in))
        passed = list(live_in)
    # A part running as Python may leave a live variable unassigned (_unsure).
    unsure = python and marked
    keywords = ([UNBOUND] if unsure else []) + ([HYBRID] if hybrid else [])
    if keywords:
        signature += ("," if signature else "") + " *, " + ", ".join(
            "%s=None" % keyword for keyword in keywords)
    name = "%s__part%d" % (function.__name__, next(_parts))
    body_line = lines[start - first]
    indent = body_line[:len(body_line) - len(body_line.lstrip())]
    head = ["def %s(%s):\n" % (name, signature)]
    if hybrid is not None:
        if start < 3:
            raise CannotSplit("hybrid_forward's body starts on line %d" % start)
        head.append("%s%s, = %s(%s, (%s))\n" % (indent, ", ".join(hybrid.names), HYBRID,
                                                _parameters(definition.args)[0],
                                                "".join("%s, " % v for v in passed)))
    source_lines = ["\n"] * (start - 1 - len(head)) + head + body
    if unsure:
        values = "".join("%s if %r in locals() else __gluon_dyn_unbound__(%r), " % (v, v, v)
                         for v in live_out)
    else:
        values = "".join("%s, " % v for v in live_out or ())
    if marked:
        source_lines.append("%sreturn (%r, (%s))\n" % (indent, LIVE, values))
    elif live_out is not None:
        source_lines.append("%sreturn (%s)\n" % (indent, values))
    source = "".join(source_lines)
    part_file = "<gluon_dyn %s of %s:%d>" % (name, filename, first)
    linecache.cache[part_file] = (len(source), None, source.splitlines(True), part_file)
    origin.register_alias(part_file, filename)
    namespace = {}
    exec(compile(source, part_file, "exec"), dict(function.__globals__), namespace)
    compiled = types.FunctionType(namespace[name].__code__, function.__globals__, name,
                                  namespace[name].__defaults__)
    compiled.__kwdefaults__ = {keyword: Unbound if keyword == UNBOUND else hybrid
                               for keyword in keywords} or None
    return compiled


def _without(arguments, names):
    """A copy of `arguments` (ast.arguments) without the parameters in `names`."""
    positional = arguments.posonlyargs + arguments.args
    defaults = [None] * (len(positional) - len(arguments.defaults)) + list(arguments.defaults)
    kept = [(arg, default) for arg, default in zip(positional, defaults)
            if arg.arg not in names]
    keyword = [(arg, default) for arg, default in zip(arguments.kwonlyargs, arguments.kw_defaults)
               if arg.arg not in names]
    trailing = [default for _, default in kept]
    while trailing and trailing[0] is None:
        trailing.pop(0)
    return ast.arguments(posonlyargs=[], args=[arg for arg, _ in kept], vararg=arguments.vararg,
                         kwonlyargs=[arg for arg, _ in keyword],
                         kw_defaults=[default for _, default in keyword],
                         kwarg=None if arguments.kwarg is not None and
                         arguments.kwarg.arg in names else arguments.kwarg,
                         defaults=trailing)


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
        # Parenthesized: `return a, b` returns the tuple (a, b) as the value.
        body[first:last + 1] = [head + "return (%r, (%s))" % (RETURNED, value) + tail] + \
            [""] * (last - first)
    return body


def _span(body, start, shift, node):
    """The source text of `node` in `body`."""
    first, last = node.lineno - start, node.end_lineno - start
    begin, end = node.col_offset + shift, node.end_col_offset + shift
    if first == last:
        return body[first][begin:end]
    return body[first][begin:] + "".join(body[first + 1:last]) + body[last][:end]
