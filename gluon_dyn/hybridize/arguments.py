"""A forward's arguments as structure plus arrays: graphs are specialised on structure.

Arrays, Python values, lists, dicts and plain objects (a parse tree's nodes, say)
are walked, and Blocks are taken as they are (keyed by identity); the structure (types, lengths, attribute names, values, array shapes
and dtypes) keys the graph, and the arrays, wherever they sit, are its inputs.
"""
import mxnet as mx

from mxnet import gluon

from .graph_breaks import Unbound

MAX_NODES = 10000
_SIMPLE = (bool, int, float, str, bytes, type(None))


class Unsupported(Exception):
    """Arguments that cannot be described as structure plus arrays."""


class ArgumentLayout:
    """structure: a hashable description; leaves: where each array sits, as steps
    from the argument tuple (("item", i) into lists and tuples, ("attr", name) into
    objects, ("key", k) into dicts); containers: the lists and dicts among them."""

    def __init__(self, args):
        self.structure_parts = []
        self.leaves = []
        self.containers = []
        self._seen = set()
        self._visit(args, ())
        self.structure = tuple(self.structure_parts)
        del self._seen

    def _visit(self, value, path):
        if len(self.structure_parts) > MAX_NODES:
            raise Unsupported("the arguments hold more than %d values" % MAX_NODES)
        if isinstance(value, mx.nd.NDArray):
            self.structure_parts.append(("array", value.shape, value.dtype))
            self.leaves.append(path)
        elif isinstance(value, Unbound):   # a variable a part of a split forward left unset
            self.structure_parts.append(("unbound", value.name))
        elif isinstance(value, _SIMPLE):
            self.structure_parts.append(("value", value))
        elif isinstance(value, gluon.Block):
            # A layer chosen in Python (`layer = self.up if ... else self.down`) and
            # passed on, between the parts of a split forward: the graph calls it.
            self.structure_parts.append(("block", id(value)))
        elif isinstance(value, (list, tuple)):
            self._enter(value)
            self.structure_parts.append((type(value).__name__, len(value)))
            for i, item in enumerate(value):
                self._visit(item, path + (("item", i),))
        elif isinstance(value, dict):
            self._enter(value)
            keys = sorted(value, key=repr)
            self.structure_parts.append(("dict", tuple(keys)))
            for key in keys:
                self._visit(value[key], path + (("key", key),))
        elif hasattr(value, "__dict__") and not isinstance(value, (gluon.Block, type)) \
                and not callable(value):
            self._enter(value)
            names = sorted(name for name in vars(value) if not name.startswith("_"))
            self.structure_parts.append(("object", type(value).__qualname__, tuple(names)))
            for name in names:
                self._visit(getattr(value, name), path + (("attr", name),))
        else:
            raise Unsupported("an argument holds a %s" % type(value).__name__)

    def _enter(self, container):
        if id(container) in self._seen:
            raise Unsupported("an argument refers to itself (a %s)" % type(container).__name__)
        self._seen.add(id(container))
        if isinstance(container, (list, dict)):
            self.containers.append(container)


def relaxed_structure(layout, relaxed):
    """`layout.structure` with the array dimensions in `relaxed` (leaf index -> dims)
    as None: a graph keyed so serves every size of them."""
    parts, leaf = [], 0
    for part in layout.structure:
        if part[0] == "array":
            dims = relaxed.get(leaf, ())
            part = ("array", tuple(None if i in dims else d for i, d in enumerate(part[1])),
                    part[2])
            leaf += 1
        parts.append(part)
    return tuple(parts)


def array_shapes(layout):
    return [part[1] for part in layout.structure if part[0] == "array"]


def get(args, path):
    value = args
    for kind, step in path:
        value = getattr(value, step) if kind == "attr" else value[step]
    return value


def put(args, path, new):
    """Replace the value at `path` (inside `args`, a list), returning the old one.
    Tuples below the top level are immutable and cannot hold a substitute."""
    parent = get(args, path[:-1])
    kind, step = path[-1]
    old = getattr(parent, step) if kind == "attr" else parent[step]
    if kind == "attr":
        setattr(parent, step, new)
    elif isinstance(parent, tuple):
        raise Unsupported("an array inside a tuple argument")
    else:
        parent[step] = new
    return old


class ContainersKept:
    """Context manager around a trace: the lists and dicts among the arguments hold,
    afterwards, what they held before (the trace put Symbols in and may have
    appended); `changed` says whether the traced code changed any of them."""

    def __init__(self, layout):
        self.saved = [(container, container.copy()) for container in layout.containers]
        self.changed = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for container, contents in self.saved:
            self.changed = self.changed or len(container) != len(contents)
            container.clear()
            if isinstance(container, list):
                container.extend(contents)
            else:
                container.update(contents)
