"""Discovery: the nodes a call runs, each matched to a compiled body.

Starting from the entry's arguments, each node's signature is walked
(signatures.py) by reading the same paths the traced body read; at a recursive
call the callee is walked first (its result type is part of the caller's
signature). The walk keeps its own stack, so no Python frame is added per level
of recursion, and runs none of the user's code. A node whose signature has no
body yet raises Miss: the engine traces it and walks again.
"""
import numpy as np

from .structure import apply, data_finding, observe


class Miss(BaseException):
    """A node whose signature has no compiled body yet. A BaseException: it
    unwinds a trace through the user's code, which may catch Exception."""

    def __init__(self, function, args):
        super().__init__(function, args)
        self.function, self.args = function, args


class Invocation:
    """One node: its body, its own arrays (the body's inputs, in order), the
    nodes its recursive calls ran (in call order), its height (0 for a node
    that calls nothing) and its row in its function's results (schedule.py)."""
    __slots__ = ("body", "arrays", "children", "height", "row")

    def __init__(self, body, arrays, children):
        self.body, self.arrays, self.children = body, arrays, children
        self.height = 1 + max(child.height for child in children) if children else 0
        self.row = None


def walk_subtree(signatures, function, args, completed):
    """The Invocation of `function(*args)`; every node under it is appended to
    `completed` callees first (the node itself last). Raises Miss."""
    stack = [_walk(signatures, function, args)]
    sent = None
    while True:
        try:
            callee, callee_args = stack[-1].send(sent)
        except StopIteration as done:
            invocation = done.value
            completed.append(invocation)
            stack.pop()
            if not stack:
                return invocation
            sent = invocation
        else:
            stack.append(_walk(signatures, callee, callee_args))
            sent = None


def _walk(signatures, function, args):
    node = signatures.roots[function]
    memo, arrays, children = {}, [], []
    while node.body is None:
        step = node.step
        if step is None:
            raise Miss(function, args)
        if step[0] == "read":
            value = _value(step[1], args, memo)
            found = observe(value)
            if found[0] == "array":
                arrays.append(value)
        elif step[0] == "data":
            real = _argument(step[1], args, memo, arrays)
            found = data_finding(real)
            arrays.append(np.array(real, dtype=step[2]))
        else:
            _, callee, specs = step
            child = yield callee, tuple(_argument(spec, args, memo, arrays) for spec in specs)
            children.append(child)
            found = child.body.output_type
        node = node.branches.get(found)
        if node is None:
            raise Miss(function, args)
    return Invocation(node.body, arrays, children)


def _value(path, args, memo):
    value = memo.get(path, memo)
    if value is memo:
        value = args[path[0][1]] if len(path) == 1 else apply(_value(path[:-1], args, memo),
                                                                 path[-1])
        memo[path] = value
    return value


def _argument(spec, args, memo, arrays):
    """The value a recursive call passes (or array data holds), from how the traced
    call passed it."""
    kind = spec[0]
    if kind == "path":
        return _value(spec[1], args, memo)
    if kind == "input":
        return arrays[spec[1]]
    if kind == "sequence":
        return spec[1](_argument(item, args, memo, arrays) for item in spec[2])
    return spec[1]   # "value"
