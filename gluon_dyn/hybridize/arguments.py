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
    objects, ("key", k) into dicts); mutables: (path, value) of the lists, dicts and
    objects among them, which the forward may change in place."""

    def __init__(self, args):
        self.structure_parts = []
        self.leaves = []
        self.mutables = []
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
            self._enter(value, path)
            self.structure_parts.append((type(value).__name__, len(value)))
            for i, item in enumerate(value):
                self._visit(item, path + (("item", i),))
        elif isinstance(value, dict):
            self._enter(value, path)
            keys = sorted(value, key=repr)
            self.structure_parts.append(("dict", tuple(keys)))
            for key in keys:
                self._visit(value[key], path + (("key", key),))
        elif hasattr(value, "__dict__") and not isinstance(value, (gluon.Block, type)) \
                and not callable(value):
            self._enter(value, path)
            names = sorted(name for name in vars(value) if not name.startswith("_"))
            self.structure_parts.append(("object", type(value).__qualname__, tuple(names)))
            for name in names:
                self._visit(getattr(value, name), path + (("attr", name),))
        else:
            raise Unsupported("an argument holds a %s" % type(value).__name__)

    def _enter(self, container, path):
        if id(container) in self._seen:
            raise Unsupported("an argument refers to itself (a %s)" % type(container).__name__)
        self._seen.add(id(container))
        if not isinstance(container, tuple):
            self.mutables.append((path, container))


class ArgumentSkeleton:
    """A call's arguments without their arrays (what `export` traces later): lists,
    tuples, dicts and Python values as they were, each array as its shape, dtype
    and context, so that nothing the call was given is kept alive."""

    def __init__(self, args):
        self._skeleton = _skeleton(args)

    def arguments(self):
        """Arguments of the same structure, with arrays of zeros; Unsupported for an
        argument an exported graph cannot take (a Python object)."""
        return _fleshed(self._skeleton)


class _ArraySpec(tuple):
    """In a skeleton: an array's (shape, dtype, context)."""


class _Opaque(str):
    """In a skeleton: a value other than arrays, containers and Python values."""


def _skeleton(value):
    if isinstance(value, mx.nd.NDArray):
        return _ArraySpec((value.shape, value.dtype, value.context))
    if isinstance(value, _SIMPLE):
        return value
    if isinstance(value, (list, tuple)):
        items = [_skeleton(item) for item in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if isinstance(value, dict):
        return {key: _skeleton(item) for key, item in value.items()}
    return _Opaque(type(value).__name__)


def _fleshed(skeleton):
    if isinstance(skeleton, _ArraySpec):
        shape, dtype, context = skeleton
        return mx.nd.zeros(shape, ctx=context, dtype=dtype)
    if isinstance(skeleton, _Opaque):
        raise Unsupported("an argument is a Python object (%s); an exported graph takes arrays"
                          % skeleton)
    if isinstance(skeleton, (list, tuple)):
        items = [_fleshed(item) for item in skeleton]
        return type(skeleton)(*items) if hasattr(skeleton, "_fields") else type(skeleton)(items)
    if isinstance(skeleton, dict):
        return {key: _fleshed(item) for key, item in skeleton.items()}
    return skeleton


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


def contents(mutable):
    """A copy of what a list, dict or object (its attributes) holds."""
    if isinstance(mutable, list):
        return list(mutable)
    return dict(mutable if isinstance(mutable, dict) else vars(mutable))


def refill(mutable, items):
    """Make a list, dict or object hold `items` (as `contents` gives them)."""
    if isinstance(mutable, list):
        mutable[:] = items
        return
    held = mutable if isinstance(mutable, dict) else vars(mutable)
    held.clear()
    held.update(items)


class Substituted:
    """Context manager around a trace: `args` is the call's arguments with the array
    at each leaf of `layout` replaced by its entry of `variables`. Lists, dicts and
    objects hold theirs in place (the forward sees the caller's own containers, as
    it does imperatively); tuples are rebuilt. `traced` is what each of
    layout.mutables held when the trace started; afterwards every one holds what it
    held before."""

    def __init__(self, args, layout, variables):
        self._originals = [(mutable, contents(mutable)) for _, mutable in layout.mutables]
        self.args = list(args)
        for path, variable in zip(layout.leaves, variables):
            self.args = _assigned(self.args, path, variable)
        self.traced = [contents(mutable) for _, mutable in layout.mutables]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for mutable, items in self._originals:
            refill(mutable, items)


def _assigned(value, path, new):
    """`value` with the item at `path` replaced by `new`: in place in lists, dicts and
    objects, in a new tuple where a tuple holds it."""
    if not path:
        return new
    kind, step = path[0]
    child = getattr(value, step) if kind == "attr" else value[step]
    updated = _assigned(child, path[1:], new)
    if isinstance(value, tuple):
        items = list(value)
        items[step] = updated
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if kind == "attr":
        setattr(value, step, updated)
    else:
        value[step] = updated
    return value
