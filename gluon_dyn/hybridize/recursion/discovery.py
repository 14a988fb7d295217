"""Discovery: the nodes a call runs, each matched to a compiled body.

Starting from the entry's arguments, each node's signature is walked
(signatures.py) by reading the same paths the traced body read; at a recursive
call the callee is walked first (its result type is part of the caller's
signature). The walk keeps its own stack, so no Python frame is added per level
of recursion, and runs none of the user's code. A node whose signature has no
body yet raises Miss: the engine traces it and walks again.

The walk runs for every node of every call, so each step of the signatures is
compiled once into a `Step` (paths interned as PathRefs, memoised per node by
identity) rather than interpreted from its description.
"""
import numpy as np

from .passes import passed_of
from .structure import FINDERS, Raised, data_finding, index_position, observe, reader

READ, DATA, CALL, SHAPE, INDEX = range(5)
ARRAY_FINDINGS = ("array", "whole", "passed")   # findings of reads that are the body's inputs


class Miss(BaseException):
    """A node whose signature has no compiled body yet. A BaseException: it
    unwinds a trace through the user's code, which may catch Exception."""

    def __init__(self, function, args):
        super().__init__(function, args)
        self.function, self.args = function, args


class Invocation:
    """One node: its body, its own arrays (the body's inputs, in order: arrays,
    numpy data, passes.Passed), the nodes its recursive calls ran (in call
    order), the arrays its down stage computes (index -> Passed, those its calls
    received so far), its height (0 for a node that calls nothing) and its row
    in its function's results (schedule.py)."""
    __slots__ = ("body", "arrays", "children", "passes", "height", "row")

    def __init__(self, body, arrays, children, passes):
        self.body, self.arrays, self.children, self.passes = body, arrays, children, passes
        height = -1
        for child in children:
            if child.height > height:
                height = child.height
        self.height = height + 1
        self.row = None


class PathRef:
    """A path from the arguments (structure.py), interned: its value is memoised
    per node under the PathRef itself. `step` is its last step and `read` takes
    it (both None for an argument itself)."""
    __slots__ = ("parent", "step", "read", "argument")

    def __init__(self, parent, step, argument):
        self.parent, self.step, self.argument = parent, step, argument
        self.read = None if parent is None else reader(step)


class Step:
    """A signature step, compiled: `kind` (READ, DATA, CALL, SHAPE or INDEX) with,
    for READ the path read, for DATA the argument spec and dtype, for CALL the
    callee and its argument specs (specs hold PathRefs instead of paths), for
    SHAPE the path of an array and the dimension (`spec`) whose size is read, for
    INDEX the path of a number and the own input (`spec`) it indexes."""
    __slots__ = ("kind", "path", "spec", "dtype", "callee", "specs")

    def __init__(self, signatures, step):
        self.kind = {"read": READ, "data": DATA, "call": CALL, "shape": SHAPE,
                     "index": INDEX}[step[0]]
        self.path = self.spec = self.dtype = self.callee = self.specs = None
        if self.kind in (READ, SHAPE, INDEX):
            self.path = path_ref(signatures.paths, step[1])
            self.spec = step[2] if self.kind != READ else None
        elif self.kind == DATA:
            self.spec, self.dtype = _compiled(signatures.paths, step[1]), step[2]
        else:
            self.callee = step[1]
            self.specs = tuple(_compiled(signatures.paths, spec) for spec in step[2])


def path_ref(paths, path):
    """The PathRef of `path`, interned in `paths` (a Signatures' own)."""
    ref = paths.get(path)
    if ref is None:
        parent = path_ref(paths, path[:-1]) if len(path) > 1 else None
        ref = paths[path] = PathRef(parent, None if parent is None else path[-1], path[0][1])
    return ref


def _compiled(paths, spec):
    kind = spec[0]
    if kind == "path":
        return ("path", path_ref(paths, spec[1]))
    if kind == "sequence":
        return ("sequence", spec[1], tuple(_compiled(paths, item) for item in spec[2]))
    return spec   # "input", "computed", "value"


def walk_subtree(signatures, function, args, completed):
    """The Invocation of `function(*args)`; every node under it is appended to
    `completed` callees first (the node itself last). Raises Miss."""
    roots, stack, finders = signatures.roots, [], FINDERS
    node, memo, arrays, children, passes = roots[function], {}, [], [], {}
    while True:
        while node.body is None:
            step = node.compiled
            if step is None:
                if node.step is None:
                    raise Miss(function, args)
                step = node.compiled = Step(signatures, node.step)
            kind = step.kind
            if kind == READ:
                ref = step.path
                value = memo.get(ref, _UNSET)
                if value is _UNSET:
                    value = _value(ref, args, memo)
                finder = finders.get(type(value))
                found = finder(value) if finder is not None else observe(value)
                if found[0] in ARRAY_FINDINGS:
                    arrays.append(value)
            elif kind == SHAPE:
                found = _value(step.path, args, memo).shape[step.spec]
            elif kind == INDEX:
                value = _value(step.path, args, memo)
                found = type(value)
                if found is int:
                    arrays.append(index_position(value, arrays[step.spec]))
            elif kind == DATA:
                real = argument(step.spec, args, memo, arrays, passes, function)
                found = data_finding(real)
                arrays.append(np.array(real, dtype=step.dtype))
            else:
                # Walk the callee first; this node resumes at `node` afterwards.
                stack.append((node, memo, arrays, children, passes, function, args))
                args = tuple([argument(spec, args, memo, arrays, passes, function)
                              for spec in step.specs])
                function = step.callee
                node, memo, arrays, children, passes = roots[function], {}, [], [], {}
                continue
            node = node.branches.get(found)
            if node is None:
                raise Miss(function, args)
        invocation = Invocation(node.body, arrays, children, passes)
        completed.append(invocation)
        if not stack:
            return invocation
        node, memo, arrays, children, passes, function, args = stack.pop()
        children.append(invocation)
        node = node.branches.get(invocation.body.output_type)
        if node is None:
            raise Miss(function, args)


_UNSET = object()


def _value(ref, args, memo):
    value = memo.get(ref, _UNSET)
    if value is _UNSET:
        parent = ref.parent
        if parent is None:
            value = args[ref.argument]
        else:
            try:
                value = ref.read(_value(parent, args, memo))
            except Exception as error:  # noqa: BLE001 - the body saw the same error
                value = Raised(error)
        memo[ref] = value
    return value


def argument(spec, args, memo, arrays, passes, function):
    """The value a recursive call passes (or array data holds), from how the traced
    call passed it; an array the node computes is a Passed (`passes`: the node's,
    `function`: its function)."""
    kind = spec[0]
    if kind == "path":
        return _value(spec[1], args, memo)
    if kind == "input":
        return arrays[spec[1]]
    if kind == "computed":
        return passed_of(passes, spec, function, arrays)
    if kind == "sequence":
        return spec[1](argument(item, args, memo, arrays, passes, function)
                       for item in spec[2])
    return spec[1]   # "value"
