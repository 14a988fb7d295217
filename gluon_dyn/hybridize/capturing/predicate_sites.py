"""Where code as written decides an `if` or a `while`, or starts a `for`: its
bytecode read against its source, once per code object.

A profiling call runs the forward as written (truth_probes.py) and learns what
converted code's `if_stmt` and `while_stmt` would have recorded (speculation.py)
from the truth tests of tensors: the instruction that asked (a frame's
`f_lasti`) says which statement's test it belongs to, and where each truth value
leads says what it decided:

    if a.sum() > 0 and b.max() < 1:   # a False: decides the `if` (not taken)
        ...                           # a True: the test goes on to b, which decides

    CONTINUES   the test goes on (`and` / `or`, before its last operand)
    TAKEN       an `if`'s body runs; a `while` runs its body once more
    NOT_TAKEN   an `if`'s body is skipped; a `while` ends

A `while`'s test is compiled twice, before the loop and after its body; the
first copy starts a fresh count of iterations (`starts_loop`) unless a
`continue` in the body jumps back to it. A `for`'s
`GET_ITER` bears the position of the whole statement, which tells it from the
`iter()` of a comprehension or an unpacking.
"""
import ast
import dis
import linecache
import weakref

from ... import origin

CONTINUES, TAKEN, NOT_TAKEN = "continues", "taken", "not taken"
BRANCH, LOOP_TEST, ROWS = "if", "while", "for"

_IF_FALSE = {"POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_FALSE", "POP_JUMP_IF_FALSE",
             "JUMP_IF_FALSE_OR_POP"}
_IF_TRUE = {"POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_TRUE", "POP_JUMP_IF_TRUE",
            "JUMP_IF_TRUE_OR_POP"}
_UNCONDITIONAL = {"JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP"}
# Chains of unconditional jumps followed to where a truth value leads.
_MOST_HOPS = 8


class Site:
    """A statement's test or iteration at one instruction: `location` (the
    statement's "file:line", as converted code names it), `kind`, and for a test
    jump, `outcomes` (what a False and a True truth value decide) and
    `starts_loop` (the first copy of a `while` test)."""
    __slots__ = ("location", "kind", "outcomes", "starts_loop")

    def __init__(self, location, kind, outcomes=None, starts_loop=False):
        self.location, self.kind = location, kind
        self.outcomes, self.starts_loop = outcomes, starts_loop


_sites = weakref.WeakKeyDictionary()   # code object -> {offset: Site}
_statements = {}                        # file name -> [_Statement]


def sites(code):
    """{instruction offset: Site} of `code`; empty for library code (MXNet, malt,
    gluon_dyn) and converted code, which records for itself."""
    found = _sites.get(code)
    if found is None:
        found = _sites[code] = {} if origin.library_or_generated(code.co_filename) \
            else _found_sites(code)
    return found


def _found_sites(code):
    statements = _file_statements(code.co_filename)
    if not statements:
        return {}
    instructions = list(dis.get_instructions(code))
    at = {instruction.offset: instruction for instruction in instructions}
    found = {}
    for index, instruction in enumerate(instructions):
        position = _position(instruction)
        if position is None:
            continue
        if instruction.opname == "GET_ITER":
            for statement in statements:
                if statement.kind is ROWS and position == statement.whole:
                    found[instruction.offset] = Site(_location(code, statement), ROWS)
            continue
        if instruction.opname not in _IF_FALSE and instruction.opname not in _IF_TRUE:
            continue
        statement = next((statement for statement in statements if statement.kind is not ROWS
                          and _inside(position, statement.test)), None)
        if statement is None or index + 1 == len(instructions):
            continue
        jumped = _outcome(statement, at, instruction.argval)
        fell = _outcome(statement, at, instructions[index + 1].offset)
        outcomes = (jumped, fell) if instruction.opname in _IF_FALSE else (fell, jumped)
        found[instruction.offset] = Site(_location(code, statement), statement.kind, outcomes,
                                         _starts_loop(statement, at, instruction.offset))
    return found


def _starts_loop(statement, at, offset):
    """Whether the test jump at `offset` is in the first copy of a `while` test,
    which only a new run of the loop reaches: the loop's body has no `continue`
    (a jump from the body back to before it)."""
    if statement.kind is not LOOP_TEST:
        return False
    body = [each for each in at.values() if _inside(_position(each), statement.body)]
    if not body or offset > body[0].offset:
        return False
    return not any(each.opname in _UNCONDITIONAL and each.argval < body[0].offset
                   for each in body)


def _outcome(statement, at, offset):
    """What reaching `offset` after a truth test of `statement`'s test means. A
    jump the compiler adds (to a loop's next iteration) bears the position of the
    test it follows: it is followed; one of the body (`continue`) is the body."""
    position = None
    for _ in range(_MOST_HOPS):
        instruction = at.get(offset)
        position = _position(instruction) if instruction is not None else None
        if _inside(position, statement.body):
            return TAKEN
        if instruction is None or instruction.opname not in _UNCONDITIONAL:
            break
        offset = instruction.argval
    return CONTINUES if _inside(position, statement.test) else NOT_TAKEN


class _Statement:
    """An `if`, `while` or `for` of a source file: its line and the spans ((line,
    column, end line, end column)) of the whole statement, its test and its body."""
    __slots__ = ("kind", "line", "whole", "test", "body")

    def __init__(self, node):
        self.kind = {ast.If: BRANCH, ast.While: LOOP_TEST, ast.For: ROWS}[type(node)]
        self.line, self.whole = node.lineno, _span(node)
        self.test = _span(node.test) if self.kind is not ROWS else None
        first, last = node.body[0], node.body[-1]
        self.body = (first.lineno, first.col_offset, last.end_lineno, last.end_col_offset)


def _file_statements(filename):
    """The If, While and For statements of a file's source (linecache: also the
    parts graph_breaks.py compiles, and notebook cells)."""
    if filename not in _statements:
        try:
            tree = ast.parse("".join(linecache.getlines(filename)))
        except (SyntaxError, ValueError):
            tree = None
        _statements[filename] = [] if tree is None else [
            _Statement(node) for node in ast.walk(tree)
            if isinstance(node, (ast.If, ast.While, ast.For))]
    return _statements[filename]


def _location(code, statement):
    return origin.code_location(code, statement.line)


def _position(instruction):
    position = instruction.positions
    if position is None or position.lineno is None or position.col_offset is None:
        return None
    return (position.lineno, position.col_offset, position.end_lineno, position.end_col_offset)


def _span(node):
    return (node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)


def _inside(position, span):
    return position is not None and position[:2] >= span[:2] and position[2:] <= span[2:]
