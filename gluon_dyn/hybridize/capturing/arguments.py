"""A forward's arguments as structure plus arrays: graphs are specialised on structure.

Arrays, Python values, lists, dicts and plain objects (a parse tree's nodes, say)
are walked, and Blocks are taken as they are (keyed by identity); the structure
(types, lengths, attribute names, values, array shapes and dtypes, the context the
arrays are on) keys the graph, and the arrays, wherever they sit, are its inputs
(NumPy arrays too: numpy_arguments.py). Modules, functions, methods and classes
(the `F` MXNet's examples pass, `net(mx.nd, x, tree)`) are Python values keyed by
identity: traced code calls them as they are.
"""
import functools
import inspect

import mxnet as mx
import numpy as np

from mxnet import gluon

from .unbound import Unbound
from .numpy_arguments import NumpyArgument

MAX_NODES = 10000
_SIMPLE = (bool, int, float, str, bytes, type(None), np.generic)


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
        self.numpy_leaves = set()   # indices of the leaves that are NumPy arrays
        self.mutables = []
        self._seen = set()
        self._contexts = []
        self._visit(args, ())
        # The context the graph runs on, which traced code reads (`x.context`): that of
        # the argument arrays (None without any).
        self.context = self._contexts[0] if self._contexts else None
        if self._contexts:
            self.structure_parts.append(("contexts", tuple(sorted(set(self._contexts), key=str))))
        self.structure = tuple(self.structure_parts)
        del self._seen, self._contexts

    def _visit(self, value, path):
        if len(self.structure_parts) > MAX_NODES:
            raise Unsupported("the arguments hold more than %d values" % MAX_NODES)
        if isinstance(value, mx.nd.NDArray):
            self.structure_parts.append(("array", value.shape, value.dtype))
            if isinstance(value, mx.np.ndarray):   # its graph input is an np symbol
                self.structure_parts.append(("numpy interface",))
            self.leaves.append(path)
            self._contexts.append(graph_context(value.context))
        elif isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
            # A graph input too, the code converting it (numpy_arguments.py).
            self.structure_parts.append(("array", value.shape, value.dtype))
            self.structure_parts.append(("numpy array",))
            self.numpy_leaves.add(len(self.leaves))
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
        elif is_keyed_by_identity(value):
            self.structure_parts.append(("python", ByIdentity(value)))
        elif hasattr(value, "__dict__"):
            self._enter(value, path)
            names = sorted(name for name in vars(value) if not name.startswith("_"))
            if callable(value):   # state its class may keep outside __dict__ too
                self.structure_parts.append(("callable", ByIdentity(value)))
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


def is_keyed_by_identity(value):
    """A module, function, method, class or partial function: a Python value the
    graph is keyed on by identity (its contents are code, not data)."""
    return inspect.ismodule(value) or inspect.isclass(value) or inspect.isroutine(value) or \
        isinstance(value, functools.partial)


class ByIdentity:
    """In a structure: a Python value equal only to itself (a bound method: to the same
    function bound to the same object), kept alive so that its id is not reused."""
    __slots__ = ("value", "_identity")

    def __init__(self, value):
        self.value = value
        self._identity = (id(value.__self__), id(value.__func__)) if inspect.ismethod(value) \
            else (id(value),)

    def __eq__(self, other):
        return isinstance(other, ByIdentity) and self._identity == other._identity

    def __hash__(self):
        return hash(self._identity)

    def __repr__(self):
        return getattr(self.value, "__qualname__", None) or getattr(self.value, "__name__", None) \
            or type(self.value).__name__


def graph_context(context):
    """The context a graph runs an array of `context` on: arrays in shared or pinned
    CPU memory (a DataLoader's batch) run on the CPU (capture.ArgumentInput)."""
    if context.device_type in ("cpu_shared", "cpu_pinned"):
        return mx.cpu(context.device_id)
    return context


class ArgumentSkeleton:
    """A call's arguments without their arrays (what `export` traces later): lists,
    tuples, dicts and Python values as they were, each array as its shape, dtype
    and context, so that nothing the call was given is kept alive."""

    def __init__(self, args):
        self._skeleton = _skeleton(args)

    def of_arrays_alone(self):
        """The skeleton, hashable, where the arguments are arrays alone (`x`, `x, y`),
        whose layouts hold nothing of the call; else None."""
        if all(type(part) is _ArraySpec for part in self._skeleton):
            return self._skeleton
        return None

    def arguments(self):
        """Arguments of the same structure, with arrays of zeros; Unsupported for an
        argument an exported graph cannot take (a Python object)."""
        return _fleshed(self._skeleton)


class _ArraySpec(tuple):
    """In a skeleton: an array's (shape, dtype, context, type: NDArray or mx.np.ndarray)."""


def arrays_fit(skeleton, args):
    """Whether `args` are arrays alone whose skeleton would be `skeleton` (one of
    ArgumentSkeleton.of_arrays_alone), told without making it."""
    if type(args) is not tuple or len(args) != len(skeleton):
        return False
    for value, (shape, dtype, context, array_type) in zip(args, skeleton):
        if type(value) is not array_type or value.shape != shape or value.dtype != dtype or \
                (context is not None and value.context != context):
            return False
    return True


class _Opaque(str):
    """In a skeleton: a value other than arrays, containers and Python values."""


def _skeleton(value):
    if isinstance(value, mx.nd.NDArray):
        return _ArraySpec((value.shape, value.dtype, value.context, type(value)))
    if isinstance(value, np.ndarray):
        return _ArraySpec((value.shape, value.dtype, None, np.ndarray))
    if isinstance(value, (list, tuple)):
        items = [_skeleton(item) for item in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if isinstance(value, _SIMPLE) or is_keyed_by_identity(value):
        return value
    if isinstance(value, dict):
        return {key: _skeleton(item) for key, item in value.items()}
    return _Opaque(type(value).__name__)


def _fleshed(skeleton):
    if isinstance(skeleton, _ArraySpec):
        shape, dtype, context, array_type = skeleton
        if array_type is np.ndarray:
            return np.zeros(shape, dtype=dtype)
        zeros = mx.nd.zeros(shape, ctx=context, dtype=dtype)
        return zeros.as_np_ndarray() if issubclass(array_type, mx.np.ndarray) else zeros
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
        for index, (path, variable) in enumerate(zip(layout.leaves, variables)):
            if index in layout.numpy_leaves:
                variable = NumpyArgument(variable)
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
