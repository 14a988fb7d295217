"""Lists and dicts kept on blocks, written by the forward: deferred updates (JANUS).

While a forward is traced, each list and dict attribute of the block tree is
replaced by a watched copy, which records whether the trace read it. Afterwards
what the trace did to the copy becomes deferred updates: appends to a list (an
array, an element appended under a branch or loop on a tensor, or a Python
constant) and item writes to a dict, in program order. Their arrays are graph
outputs; the executor applies the updates after the graph ran and every guard
held, never otherwise. A container the trace never read is not part of the cache
key (its length changes every call). Other changes (removing, reordering,
replacing items) make the forward run as Python.
"""
import dataclasses
import typing

import mxnet as mx

from . import effects, tracing
from .python_state import owner_of

class _Watched:
    """Mixin: `read` becomes True when the trace looks at the container."""
    read = False


def _reading(method):
    def watched(self, *args, **kwargs):
        self.read = True
        return method(self, *args, **kwargs)
    return watched


class WatchedList(_Watched, list):
    pass


class WatchedDict(_Watched, dict):
    pass


for _name in ("__len__", "__getitem__", "__iter__", "__contains__", "__reversed__", "index",
              "count", "copy", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__",
              "__add__", "__mul__", "__repr__"):
    setattr(WatchedList, _name, _reading(getattr(list, _name)))
for _name in ("__len__", "__getitem__", "__iter__", "__contains__", "get", "keys", "values",
              "items", "copy", "setdefault", "pop", "popitem", "__eq__", "__ne__", "__repr__"):
    setattr(WatchedDict, _name, _reading(getattr(dict, _name)))
del _name


def watch(value):
    """A watched copy of a list or dict."""
    watched = (WatchedList if isinstance(value, list) else WatchedDict)(value)
    watched.read = False
    return watched


@dataclasses.dataclass(frozen=True)
class ContainerWrite:
    """One deferred update of the container at attribute `path`: `append` (key None)
    or a dict item write at `key`, of a value rebuilt from `count` graph outputs by
    `kind`: "array", "conditional" (appended if its flag is set), "rows" (each valid
    row appended) or "constant" (`constant`, no output)."""
    path: str
    key: typing.Any
    kind: str
    count: int
    constant: typing.Any = None

    def apply(self, block, outputs):
        owner, attr = owner_of(block, self.path)
        container = getattr(owner, attr)
        if self.kind == "constant":
            values = [self.constant]
        elif self.kind == "array":
            values = [outputs[0]]
        elif self.kind == "conditional":   # a value present on a flag (a constant's: alone)
            value = outputs[0] if self.count == 2 else self.constant
            values = [value] if outputs[-1].asscalar() else []
        else:
            valid = outputs[1].asnumpy()
            values = [outputs[0][int(row)] for row in valid.nonzero()[0]]
        for value in values:
            if self.key is None:
                container.append(value)
            else:
                container[self.key] = value


def container_writes(path, original, watched, where):
    """[(ContainerWrite, graph outputs)] for what the trace did to `watched`, the
    watched copy of `original`; FallbackRequired for what cannot be deferred."""
    if isinstance(original, list):
        if len(watched) < len(original) or any(
                a is not b for a, b in zip(list.__iter__(watched), original)):
            raise tracing.FallbackRequired("the forward changes the list %s other than by "
                                           "appending to it" % path, where)
        return [_write(path, None, value, where)
                for value in list(list.__iter__(watched))[len(original):]]
    writes = []
    for key in dict.__iter__(original):
        if not dict.__contains__(watched, key):
            raise tracing.FallbackRequired("the forward removes the key %r of the dict %s"
                                           % (key, path), where)
    for key in dict.__iter__(watched):
        value = dict.__getitem__(watched, key)
        if not dict.__contains__(original, key) or value is not dict.__getitem__(original, key):
            writes.append(_write(path, key, value, where))
    return writes


def _write(path, key, value, where):
    if isinstance(value, mx.sym.Symbol):
        return ContainerWrite(path, key, "array", 1), [value]
    if isinstance(value, effects.Conditional):
        parts = value.parts()
        return ContainerWrite(path, key, "conditional", len(parts), value.value), parts
    if isinstance(value, effects.Rows) and key is None:
        return ContainerWrite(path, key, "rows", 2), value.parts()
    if isinstance(value, effects.CONSTANTS):
        return ContainerWrite(path, key, "constant", 0, value), []
    raise tracing.FallbackRequired(
        "the forward puts a %s into %s; a graph can keep arrays and Python constants there"
        % (type(value).__name__, path), where)
