"""Discovery's walk compiled to Python: one function per recursive function,
generated from its tree of signatures (signatures.py), doing what
discovery.walk_subtree does with the interpretation taken out.

walk_subtree reads a node's signature step by step (look up the step, its path,
memoised values, the branch for what it found) for every node of every call:
about 4 microseconds a node, the largest cost of a call of small bodies. The
generated code reads each path into a local variable (which paths a code path
already read is known when generating), compares findings against constants and
calls the callee's function for a recursive call: about twice as fast.

An array read where the signatures know one array finding only (a leaf's word:
shape (1,), float32; other nodes may read None there) is taken to be that,
unchecked: the stacking of the group's arrays checks them all at once
(execution.py), and a call where one differs is walked again by the generic
walk, which checks every read. Reading an array's shape and dtype costs about a
microsecond: a third of the walk of a leaf.

Recursive calls recurse in Python here; below MAX_DEPTH levels the generic walk
(its own stack, no Python frames) takes the subtree, so no depth of tree raises
a RecursionError. The functions are generated again when the signatures grew.
"""
import mxnet as mx
import numpy as np

from .discovery import ARRAY_FINDINGS, Invocation, Miss, path_ref, walk_subtree
from .passes import passed_of
from .structure import FINDERS, Raised, data_finding, index_position, observe, reader

MAX_DEPTH = 100   # levels of Python recursion before the generic walk takes over


def walker(signatures, function):
    """The compiled walk of `function` under `signatures`: walk(args, completed,
    depth) with walk_subtree's contract (depth: the caller's depth + 1)."""
    if signatures.walkers is None:
        signatures.walkers = Walkers(signatures)
    return signatures.walkers[function]


class Walkers(dict):
    """function -> its compiled walk, generated when first asked for (the
    signatures empty it when they grow)."""

    def __init__(self, signatures):
        super().__init__()
        self.signatures = signatures

    def __missing__(self, function):
        walk = self[function] = _generate(self.signatures, function)
        return walk


class _Source:
    """Python source being generated, with the values it refers to by name."""

    def __init__(self, signatures, function):
        self.lines, self.namespace = [], {
            "Invocation": Invocation, "Miss": Miss, "Raised": Raised, "observe": observe,
            "FINDERS": FINDERS, "NDArray": mx.nd.NDArray,
            "data_finding": data_finding, "np_array": np.array, "WALKERS": signatures.walkers,
            "walk_subtree": walk_subtree, "SIGNATURES": signatures, "FUNCTION": function,
            "MAX_DEPTH": MAX_DEPTH, "passed_of": passed_of, "index_position": index_position}
        self.signatures = signatures
        self.variables = {}    # PathRef -> local variable name

    def constant(self, value):
        name = "K%d" % len(self.namespace)
        self.namespace[name] = value
        return name

    def emit(self, indent, text):
        self.lines.append("    " * indent + text)

    def variable(self, ref):
        if ref not in self.variables:
            self.variables[ref] = "v%d" % len(self.variables)
        return self.variables[ref]


def _generate(signatures, function):
    source = _Source(signatures, function)
    source.emit(0, "def walk(args, completed, depth):")
    source.emit(1, "if depth > MAX_DEPTH:")
    source.emit(2, "return walk_subtree(SIGNATURES, FUNCTION, args, completed)")
    source.emit(1, "arrays = []")
    source.emit(1, "children = []")
    source.emit(1, "passes = {}")
    _node(source, signatures.roots[function], set(), 1)
    exec(compile("\n".join(source.lines), "<compiled walk of %s>" % function, "exec"),
         source.namespace)
    return source.namespace["walk"]


def _node(source, node, read, indent):
    """Code for the walk from `node` on; `read` holds the PathRefs read on the
    way here (their variables hold the values). A step with one finding known
    checks it and goes on at the same indentation (a deep signature, a long list
    of trees, must not nest deeper than Python allows); several branch."""
    while True:
        if node.body is not None:
            source.emit(indent, "invocation = Invocation(%s, arrays, children, passes)"
                        % source.constant(node.body))
            source.emit(indent, "completed.append(invocation)")
            source.emit(indent, "return invocation")
            return
        if node.step is None:
            source.emit(indent, "raise Miss(FUNCTION, args)")
            return
        array = _step_code(source, node, read, indent)
        if len(node.branches) != 1:
            break
        found, node = next(iter(node.branches.items()))
        source.emit(indent, "if not (found is {0} or found == {0}):".format(
            source.constant(found)))
        source.emit(indent + 1, "raise Miss(FUNCTION, args)")
        if array is not None and found[0] in ARRAY_FINDINGS:
            source.emit(indent, "arrays.append(%s)" % array)
    keyword = "if"
    for found, branch in node.branches.items():
        # Findings equal to a constant are mostly the same object (body.OutputType).
        source.emit(indent, "{0} found is {1} or found == {1}:".format(
            keyword, source.constant(found)))
        if array is not None and found[0] in ARRAY_FINDINGS:
            source.emit(indent + 1, "arrays.append(%s)" % array)
        _node(source, branch, set(read), indent + 1)
        keyword = "elif"
    if keyword == "elif":
        source.emit(indent, "else:")
        indent += 1
    source.emit(indent, "raise Miss(FUNCTION, args)")


def _step_code(source, node, read, indent):
    """Code taking `node`'s step, leaving what it found in `found`; the variable
    holding the value read, for a read step."""
    step, array = node.step, None
    if step[0] == "read":
        array = _path(source, path_ref(source.signatures.paths, step[1]), read, indent)
        speculated = _speculated(node)
        if speculated is not None:
            source.emit(indent, "if type(%s) is NDArray:" % array)
            source.emit(indent + 1, "found = %s" % source.constant(speculated))
            source.emit(indent, "else:")
        # observe() without its call: the finder of the value's type.
        source.emit(indent + (speculated is not None),
                    "found = (FINDERS.get(type({0})) or observe)({0})".format(array))
    elif step[0] == "index":
        value = _path(source, path_ref(source.signatures.paths, step[1]), read, indent)
        source.emit(indent, "found = type(%s)" % value)
        source.emit(indent, "if found is int:")
        source.emit(indent + 1, "arrays.append(index_position(%s, arrays[%d]))" % (value, step[2]))
    elif step[0] == "shape":
        value = _path(source, path_ref(source.signatures.paths, step[1]), read, indent)
        source.emit(indent, "found = %s.shape[%d]" % (value, step[2]))
    elif step[0] == "data":
        source.emit(indent, "real = %s" % _argument(source, step[1], read, indent))
        source.emit(indent, "found = data_finding(real)")
        source.emit(indent, "arrays.append(np_array(real, dtype=%r))" % step[2])
    else:
        arguments = [_argument(source, spec, read, indent) for spec in step[2]]
        source.emit(indent, "child = WALKERS[%s]((%s), completed, depth + 1)" % (
            source.constant(step[1]), "".join(a + ", " for a in arguments)))
        source.emit(indent, "children.append(child)")
        source.emit(indent, "found = child.body.output_type")
    return array


def _speculated(node):
    """The finding a read of an array takes unchecked: the only array finding its
    signatures know there (a leaf's word, where other nodes read None), an array
    with a leading axis of 1 (stacking such arrays checks each: see
    execution.stacked_own); else None."""
    arrays = [found for found in node.branches if found[0] in ARRAY_FINDINGS]
    if len(arrays) != 1:
        return None
    found = arrays[0]
    return found if found[0] == "array" and found[1][:1] == (1,) else None


def _path(source, ref, read, indent):
    """The variable holding `ref`'s value, after code reading it if needed."""
    name = source.variable(ref)
    if ref in read:
        return name
    if ref.parent is None:
        source.emit(indent, "%s = args[%d]" % (name, ref.argument))
    else:
        parent = _path(source, ref.parent, read, indent)
        source.emit(indent, "try:")
        source.emit(indent + 1, "%s = %s" % (name, _step(source, ref.step, parent)))
        source.emit(indent, "except Exception as error:  # noqa: BLE001 - the body saw it")
        source.emit(indent + 1, "%s = Raised(error)" % name)
    read.add(ref)
    return name


def _step(source, step, value):
    """An expression taking `step` from `value` (structure.reader's, spelled out)."""
    kind = step[0]
    if kind == "attr" and step[1].isidentifier() and not step[1].startswith("__"):
        return "%s.%s" % (value, step[1])
    if kind in ("item", "key") and type(step[1]) in (int, str):
        return "%s[%r]" % (value, step[1])
    return "%s(%s)" % (source.constant(reader(step)), value)


def _argument(source, spec, read, indent):
    """An expression for the value a recursive call passes (or array data holds)."""
    kind = spec[0]
    if kind == "path":
        return _path(source, path_ref(source.signatures.paths, spec[1]), read, indent)
    if kind == "input":
        return "arrays[%d]" % spec[1]
    if kind == "computed":
        return "passed_of(passes, %s, FUNCTION, arrays)" % source.constant(spec)
    if kind == "sequence":
        items = [_argument(source, item, read, indent) for item in spec[2]]
        return "%s((%s))" % (source.constant(spec[1]), "".join(i + ", " for i in items))
    return source.constant(spec[1])   # "value"

