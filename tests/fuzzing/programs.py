"""Random small Gluon programs with Python control flow, as readable source.

A program is a Block (forward, `mx.nd`) or a HybridBlock (hybrid_forward, `F`)
whose forward(x, limit) mixes nested `if`/`while`/`for` on tensor and Python
predicates, `break`/`continue`/early `return`, child Dense layers, a helper
function, lists of tensors, updates of `self` attributes, activations,
elementwise and reduction ops, slicing and concat/stack, and the older Gluon
idioms (IDIOMS: item assignment, unpacking, NDArray attributes, autograd scopes,
a namespace passed as `F`). Statements are plain
tuples so that a failing program can be shrunk by dropping statements; `render`
turns one into Python source.
"""
import collections
import random

TENSORS = ("v0", "v1", "v2")
MAX_DEPTH = 3

# The arrays' dtype: a share of the programs run in float64 (blocks cast, inputs and
# the arrays they make in it), where the graphs' own float32 bookkeeping meets them.
Program = collections.namedtuple("Program", "hybrid body dtype", defaults=("float32",))
FLOAT64_SHARE = 0.25

HEADER = '''import mxnet as mx
from mxnet import gluon

DTYPE = "{dtype}"


def helper({F_param}value, layer):
    if {F}.sum(value) > 0:
        return {F}.tanh(layer(value))
    return value * 0.5


def scaled(F, value, c):
    return F.{add}(F.relu(value) * c, F.abs(value))


class Program(gluon.{base}):
    DTYPE = DTYPE

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.d0 = gluon.nn.Dense(4, in_units=4)
            self.d1 = gluon.nn.Dense(4, in_units=4)
            self.drop = gluon.nn.Dropout(0.5)
        self.flag = True
        self.n = 2
        self.count = 0
        self.total = 0.0
        self.state = mx.nd.zeros((1, 4), dtype=DTYPE)

    def {method}:
        v0, v1, v2 = x, x * 0.5, {F}.tanh(x)
        acc = [x]
'''

# Right-hand sides of `target = ...` over tensors a, b (shape (batch, 4)), a
# constant c and a layer; every form keeps the shape.
ASSIGN_FORMS = (
    "{F}.tanh(self.{layer}({a})) + {b} * {c}",
    "{a} * {c} - {F}.relu({b})",
    "{F}.sigmoid({a}) * {b}",
    "{F}.concat({a}[:, :2], {b}[:, 2:] * {c}, dim=1)",
    "{F}.broadcast_sub({a}, {F}.mean({b}, axis=1, keepdims=True) * {c})",
    "{F}.broadcast_mul({a}, {F}.softmax({b}, axis=1))",
    "{F}.sum({F}.stack({a}, {b}, axis=0), axis=0) * {c}",
    "{F}.broadcast_add({F}.abs({a}) * {c}, {F}.max({b}, axis=0, keepdims=True))",
)

class Generator:
    """Random statements; `rng` decides everything, so a seed reproduces a program.
    With `breaks`, blocks also read values to the host in the middle of graph code:
    a Python `if` on a read value (a graph break), a metric kept on self, argmax
    positions read into a Python list that index arrays and the list (both kept in
    the graph: hybridize/capturing/host_values.py); and keep the rows of a tensor a
    data-dependent mask selects (boolean_mask: a shape known only once the graph
    runs). Without `state`, no statement keeps state on the block."""

    def __init__(self, rng, breaks=False, state=True):
        self.rng, self.breaks, self.state = rng, breaks, state

    def program(self):
        hybrid = self.rng.random() < 0.3
        body = [self.statement(0, in_loop=False) for _ in range(self.rng.randint(2, 5))]
        if self.breaks:   # at least one read, somewhere in the forward's top level
            body.insert(self.rng.randint(0, len(body)), self.host_read(0, in_loop=False))
            if self.rng.random() < 0.5:
                body.insert(self.rng.randint(0, len(body)), self.mask())
        return Program(hybrid, body,
                       "float64" if self.rng.random() < FLOAT64_SHARE else "float32")

    def mask(self):
        return ("mask", self.rng.choice(TENSORS), self.rng.choice(TENSORS),
                round(self.rng.uniform(0, 2), 2))

    def host_read(self, depth, in_loop):
        value = self.rng.choice(TENSORS)
        draw = self.rng.random()
        if draw < 0.3:
            return ("index", self.rng.choice(TENSORS), value, round(self.rng.uniform(-1, 1), 2))
        if depth >= MAX_DEPTH or draw < 0.65:
            return ("metric", value)
        return ("host_if", value, round(self.rng.uniform(-2, 2), 2),
                self.block(depth + 1, in_loop), self.block(depth + 1, in_loop))

    def statement(self, depth, in_loop):
        if self.breaks and self.rng.random() < 0.1:
            return self.host_read(depth, in_loop)
        choices = ["assign", "assign", "assign", "helper", "append"] + \
            (["state"] if self.state else []) + [self.idiom()]
        if depth < MAX_DEPTH:
            choices += ["if_tensor", "if_tensor", "if_python", "while", "for_range", "for_rows"]
        if in_loop:
            choices += ["break", "continue"]
        if depth > 0:
            choices += ["return"]
        kind = self.rng.choice(choices)
        pick = self.rng.choice
        if kind == "assign":
            form = self.rng.randrange(len(ASSIGN_FORMS))
            return ("assign", pick(TENSORS), pick(TENSORS), pick(TENSORS), form,
                    round(self.rng.uniform(-1, 1), 2), pick(("d0", "d1")))
        if kind == "helper":
            return ("helper", pick(TENSORS), pick(TENSORS), pick(("d0", "d1")))
        if kind in IDIOMS:
            return (kind, pick(TENSORS), pick(TENSORS), round(self.rng.uniform(-1, 1), 2),
                    self.rng.randrange(4))
        if kind == "append":
            return ("append", pick(TENSORS))
        if kind == "state":
            return ("state", pick(TENSORS), self.rng.random() < 0.3)
        if kind in ("break", "continue", "return"):
            return (kind, pick(TENSORS), round(self.rng.uniform(-2, 2), 2))
        body = self.block(depth + 1, in_loop or kind in ("while", "for_range", "for_rows"))
        if kind == "if_tensor":
            return ("if_tensor", pick(TENSORS), round(self.rng.uniform(-2, 2), 2), body,
                    self.block(depth + 1, in_loop))
        if kind == "if_python":
            return ("if_python", body, self.block(depth + 1, in_loop))
        if kind == "for_rows":
            return ("for_rows", pick(TENSORS), pick(TENSORS), body)
        return (kind, body)

    def idiom(self):
        """One of the older Gluon idioms (IDIOMS), drawn as a statement kind."""
        return self.rng.choice(IDIOMS)

    def block(self, depth, in_loop):
        return [self.statement(depth, in_loop) for _ in range(self.rng.randint(1, 3))]


# Statements of the older Gluon idioms over a target, a source tensor, a constant c
# and a position k < 4 (_render_idiom): item assignment of constants into a new
# array (what MXNet allows while autograd records) including `+=`, a slice with a
# step and an index list; unpacking a tensor's rows; NDArray attributes and methods
# (`.T`, `.copy()`, `astype`, `reshape(-1, 2)`, `as_in_context`); values made under
# autograd.pause() (no gradient) and a dropout under predict_mode() (an identity);
# the namespace passed to a function as `F`.
IDIOMS = ("mask_item", "unpack", "attributes", "paused", "predicted", "takes_F")


def _render_idiom(statement, pad, lines):
    kind, target, source, c, k = statement
    if kind == "mask_item":
        lines.append(pad + "mask = {F}.ones((1, 4), dtype=DTYPE)")
        lines.append(pad + "mask[0, %d] = %s" % (k, c))
        lines.append(pad + "mask[:, ::2] += 0.5")
        lines.append(pad + "mask[0, [%d, 3]] *= 2" % k)
        lines.append(pad + "%s = {F}.broadcast_mul(%s, mask)" % (target, target))
    elif kind == "unpack":
        lines.append(pad + "first, *rest = %s" % source)
        lines.append(pad + "%s = {F}.broadcast_add(%s, first.reshape((1, 4)) * %s + "
                     "{F}.sum({F}.stack(*rest), axis=0, keepdims=True))" % (target, target, c))
    elif kind == "attributes":
        lines.append(pad + "%s = %s.T.T * %s + %s.copy().astype('{other}').astype(DTYPE)"
                     ".reshape(-1, 2).reshape(-1, 4).as_in_context(%s.context)"
                     % (target, target, c, source, source))
    elif kind == "paused":
        lines.append(pad + "with mx.autograd.pause():")
        lines.append(pad + "    paused = {F}.tanh(self.d%d(%s)) * %s" % (k % 2, source, c))
        lines.append(pad + "%s = %s + paused" % (target, target))
    elif kind == "predicted":
        lines.append(pad + "with mx.autograd.predict_mode():")
        lines.append(pad + "    %s = self.drop(%s) + %s * %s" % (target, target, source, c))
    else:
        lines.append(pad + "%s = scaled({F}, %s, %s)" % (target, source, c))


def render(program):
    """Python source of `program`: a Block uses `mx.nd`, a HybridBlock the `F` it is given."""
    lines = HEADER.splitlines()
    _render_block(program.body, 2, lines, loop_depth=0)
    lines.append("        return {F}.broadcast_add(v0 + v1 + v2, {F}.sum({F}.stack(*acc)))")
    if program.hybrid:
        base, method, namespace = "HybridBlock", "hybrid_forward(self, F, x, limit)", "F"
    else:
        base, method, namespace = "Block", "forward(self, x, limit)", "mx.nd"
    source = "\n".join(lines) + "\n"
    # `F.add` is mx.nd's (MXNet's examples pass F=mx.nd); mx.sym has no `add`.
    other = "float32" if program.dtype == "float64" else "float64"
    for name, value in (("base", base), ("method", method), ("F", namespace),
                        ("dtype", program.dtype), ("other", other),
                        ("F_param", "F, " if program.hybrid else ""),
                        ("add", "broadcast_add" if program.hybrid else "add")):
        source = source.replace("{%s}" % name, value)
    return source


def _render_block(statements, level, lines, loop_depth):
    pad = "    " * level
    if not statements:
        lines.append(pad + "pass")
    for statement in statements:
        _render(statement, level, lines, loop_depth)


def _render(statement, level, lines, loop_depth):
    pad = "    " * level
    kind = statement[0]
    if kind == "assign":
        _, target, a, b, form, c, layer = statement
        expression = ASSIGN_FORMS[form].format(F="{F}", a=a, b=b, c=c, layer=layer)
        lines.append(pad + "%s = %s" % (target, expression))
    elif kind == "helper":
        lines.append(pad + "%s = helper({F_param}%s, self.%s)" % statement[1:])
    elif kind in IDIOMS:
        _render_idiom(statement, pad, lines)
    elif kind == "append":
        lines.append(pad + "acc.append(%s)" % statement[1])
    elif kind == "state":
        _, value, python_counter = statement
        if python_counter:
            lines.append(pad + "self.count += 1")
        else:
            # State kept across calls is read detached, as it must be imperatively
            # (MXNet fails on an array whose recorded graph a backward freed).
            lines.append(pad + "self.state = {F}.broadcast_add(self.state.detach() * 0.5, "
                         "{F}.mean(%s, axis=0, keepdims=True))" % value)
    elif kind in ("break", "continue", "return"):
        _, value, c = statement
        lines.append(pad + "if {F}.sum(%s) > %s:" % (value, c))
        lines.append(pad + "    " + (kind if kind != "return" else
                                     "return {F}.broadcast_add(%s, {F}.sum(self.state.detach()))"
                                     % value))
    elif kind == "if_tensor":
        _, value, c, body, orelse = statement
        lines.append(pad + "if {F}.sum(%s) > %s:" % (value, c))
        _render_block(body, level + 1, lines, loop_depth)
        lines.append(pad + "else:")
        _render_block(orelse, level + 1, lines, loop_depth)
    elif kind == "mask":
        # The rows whose sum is within c of the smallest (at least one row is kept),
        # averaged. The mask is detached: MXNet 1.9.1 crashes in an imperative backward
        # through a boolean_mask whose mask was recorded.
        _, target, source, c = statement
        sums = "{F}.sum(%s, axis=1)" % source
        lines.append(pad + "%s = {F}.broadcast_add(%s, {F}.mean({F}.contrib.boolean_mask(%s, "
                     "(%s <= {F}.min(%s) + %s).detach()), axis=0, keepdims=True))"
                     % (target, target, source, sums, sums, c))
    elif kind == "index":
        # Positions read to the host, kept in a list, indexing the list and an array.
        _, target, source, c = statement
        sums = "{F}.sum(%s, axis=0)" % source
        lines.append(pad + "ptrs = [int({F}.argmax(%s, axis=0).asscalar()), "
                     "int({F}.argmin(%s, axis=0).asscalar())]" % (sums, sums))
        lines.append(pad + "%s = {F}.broadcast_add(%s, %s[0, ptrs[ptrs[0] %% 2]] * %s)"
                     % (target, target, source, c))
    elif kind == "metric":
        lines.append(pad + "self.total += float({F}.mean(%s).asscalar())" % statement[1])
    elif kind == "host_if":
        _, value, c, body, orelse = statement
        lines.append(pad + "if float({F}.sum(%s).asscalar()) > %s:" % (value, c))
        _render_block(body, level + 1, lines, loop_depth)
        lines.append(pad + "else:")
        _render_block(orelse, level + 1, lines, loop_depth)
    elif kind == "if_python":
        _, body, orelse = statement
        lines.append(pad + "if self.flag:")
        _render_block(body, level + 1, lines, loop_depth)
        lines.append(pad + "else:")
        _render_block(orelse, level + 1, lines, loop_depth)
    elif kind == "while":
        counter = "i%d" % loop_depth
        lines.append(pad + "%s = {F}.zeros((1,))" % counter)
        lines.append(pad + "while {F}.sum(%s) < {F}.sum(limit):" % counter)
        # The counter moves first, so that `continue` cannot loop forever.
        lines.append(pad + "    %s = %s + 1" % (counter, counter))
        _render_block(statement[1], level + 1, lines, loop_depth + 1)
    elif kind == "for_range":
        lines.append(pad + "for t%d in range(self.n):" % loop_depth)
        _render_block(statement[1], level + 1, lines, loop_depth + 1)
    elif kind == "for_rows":
        _, target, source, body = statement
        row = "row%d" % loop_depth
        lines.append(pad + "for %s in %s:" % (row, source))
        lines.append(pad + "    %s = {F}.broadcast_add(%s, {F}.sum(%s) * 0.1)" % (target, target, row))
        _render_block(body, level + 1, lines, loop_depth + 1)


def generate(seed, breaks=False, state=True):
    """The program of `seed`; without `state`, one that keeps nothing on its block
    (no `self.count`/`self.state` updates: batched training steps defer its calls)."""
    return Generator(random.Random(seed), breaks, state).program()


def shrink_candidates(program):
    """Programs with one statement removed or one compound statement replaced by its body."""
    for body in _smaller_bodies(program.body):
        yield program._replace(body=body)


def _smaller_bodies(statements):
    for i, statement in enumerate(statements):
        yield statements[:i] + statements[i + 1:]
        for j, part in enumerate(statement):
            if isinstance(part, list) and part:
                for smaller in _smaller_bodies(part):
                    yield statements[:i] + [statement[:j] + (smaller,) + statement[j + 1:]] + \
                        statements[i + 1:]
                yield statements[:i] + part + statements[i + 1:]
