"""Which methods of a block recurse: found in their source, before any call.

A method recurses when it can reach itself through calls `self.name(...)`
(`self(...)` and `self.forward(...)` reach `forward`). Only methods of plain
Blocks are considered: a HybridBlock's forward takes arrays, not Python data.
"""
import ast
import dataclasses
import inspect
import textwrap

from mxnet import gluon

from ..capturing.weak_binding import BlockReference


@dataclasses.dataclass(frozen=True)
class RecursiveMethod:
    owner_reference: BlockReference   # to the block whose method it is
    name: str
    location: str        # "file:line" of a call through which it recurses

    @property
    def owner(self):
        return self.owner_reference()


def recursive_methods(block):
    """The recursive methods of `block` and of its plain child Blocks."""
    found = []
    for owner in _plain_blocks(block):
        calls = {name: _self_calls(function) for name, function in _user_methods(type(owner))}
        for name in calls:
            location = _cycle_location(name, calls)
            if location is not None:
                found.append(RecursiveMethod(BlockReference(owner), name, location))
    return found


def _plain_blocks(block):
    if not isinstance(block, gluon.HybridBlock):
        yield block
        for child in block._children.values():
            yield from _plain_blocks(child)


def _user_methods(cls):
    for name, function in inspect.getmembers(cls, inspect.isfunction):
        if function.__module__.split(".")[0] not in ("mxnet", "gluon_dyn"):
            yield name, function


def _self_calls(function):
    """{method name: "file:line" of its first call} for the `self.<name>(...)`
    calls in `function`'s source."""
    try:
        lines, first = inspect.getsourcelines(function)
    except (OSError, TypeError):
        return {}
    tree = ast.parse(textwrap.dedent("".join(lines)))
    arguments = tree.body[0].args.args if tree.body and hasattr(tree.body[0], "args") else []
    if not arguments:
        return {}
    me = arguments[0].arg     # "self"
    where = inspect.getsourcefile(function)
    calls = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        target = node.func
        if isinstance(target, ast.Name) and target.id == me:
            callee = "forward"
        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                and target.value.id == me:
            callee = target.attr
        else:
            continue
        calls.setdefault(callee, "%s:%d" % (where, first + node.lineno - 1))
    return calls


def _cycle_location(start, calls):
    """The call site in `start` through which it reaches itself, or None."""
    for callee, location in calls.get(start, {}).items():
        seen, pending = set(), [callee]
        while pending:
            name = pending.pop()
            if name == start:
                return location
            if name not in seen:
                seen.add(name)
                pending.extend(calls.get(name, {}))
    return None
