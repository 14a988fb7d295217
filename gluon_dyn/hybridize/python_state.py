"""The Python state of a block tree: what a forward may branch on (part of the cache
key), the arrays kept on blocks (graph inputs and outputs), and the rollback that
leaves a trace without side effects."""
import weakref

import mxnet as mx

from . import tracing
from .transpiler import global_reads

_SIMPLE_TYPES = (bool, int, float, str, type(None))
NUMBER_TYPES = (bool, int, float)
# Public attributes never branched on as values: child blocks (keyed by identity
# below) and parameters (graph inputs).
_SKIPPED_TYPES = (mx.gluon.Block, mx.gluon.Parameter)
_TENSORS = (mx.nd.NDArray, mx.sym.Symbol)
_MISSING = object()


def _is_simple(value):
    return isinstance(value, _SIMPLE_TYPES) or (
        isinstance(value, tuple) and all(_is_simple(item) for item in value))


def python_state(block, unkeyed=frozenset()):
    """The Python values a forward may branch on: those of the block tree (but the
    attribute paths in `unkeyed`, which graphs take as inputs), and the
    module-level values converted code reads."""
    return tuple(item for item in _block_state(block) if item[0] not in unkeyed) + global_state()


def global_containers():
    """The module-level lists, dicts and sets converted code reads."""
    return [namespace[name] for namespace, names in global_reads() for name in names
            if isinstance(namespace.get(name), (list, dict, set))]


def global_state():
    """Module-level values converted code reads that it may branch on: simple values,
    and the contents of containers (contents_key)."""
    values = []
    for namespace, names in global_reads():
        module = namespace.get("__name__", "?")
        for name in sorted(names):
            value = namespace.get(name)
            # Qualified: modules may use the same name for different values.
            if isinstance(value, (bool, int, float, str)):
                values.append(("%s.%s" % (module, name), value))
            elif isinstance(value, (list, dict, set)):
                values.append(("%s.%s" % (module, name), contents_key(value)))
    return tuple(values)


# Bumped whenever an attribute of a block is set or deleted or a child registered
# (patches.py): a block tree's attributes are walked again only then. Lists, dicts
# and sets change in place, so their keys are made afresh at every call.
_changes = [0]
_walked = weakref.WeakKeyDictionary()   # block -> (changes, [(item, container or None)])


def noting_block_changes(method):
    """`method` of Block (setting an attribute, registering a child), counting the change."""
    def counting(self, *args, **kwargs):
        _changes[0] += 1
        return method(self, *args, **kwargs)
    return counting


def _block_state(block):
    walked = _walked.get(block)
    if walked is None or walked[0] != _changes[0]:
        walked = _walked[block] = (_changes[0], _walk(block))
    return tuple(item if container is None else (item[0], _mutable_key(container))
                 for item, container in walked[1])


def _walk(block):
    """[(key item, the list/dict/set it keys, or None)] of the block tree."""
    entries = []

    def visit(node, path):
        # Filtered before sorting: a Gluon block holds many private attributes.
        for name, value in sorted((name, value) for name, value in vars(node).items()
                                  if name[0] != "_" and not isinstance(value, _SKIPPED_TYPES)):
            if _is_simple(value):
                entries.append(((path + name, value), None))
            elif isinstance(value, (list, dict, set)):
                entries.append(((path + name, None), value))
            elif is_tensor_value(value):    # state: its arrays are graph inputs
                entries.append(((path + name, ("len", len(value))), None))
        for child_name, child in node._children.items():
            # Which block: a replaced layer is a different graph (its parameters
            # are graph inputs). Graphs keep their blocks alive, so ids stay unique.
            entries.append(((path + child_name, ("block", id(child))), None))
            visit(child, path + child_name + ".")

    visit(block, "")
    return entries


def _mutable_key(container):
    # A list of arrays is state (its arrays are graph inputs): keyed by its length.
    return ("len", len(container)) if is_tensor_value(container) else contents_key(container)


# Items of a container keyed one by one; a larger one is keyed by its length and
# identity (a graph that read its contents would need a key as large).
MAX_KEYED_ITEMS = 256


def contents_key(container):
    """What a graph traced on a list, dict or set of Python values depends on: its
    simple items by value, others (arrays, objects) by identity; graphs keep what
    they captured alive, so identities stay unique."""
    if len(container) > MAX_KEYED_ITEMS:
        return ("large", len(container), id(container))
    items = sorted(container.items(), key=repr) if isinstance(container, dict) else \
        sorted(container, key=repr) if isinstance(container, set) else container
    return ("contents", tuple(_item_key(item) for item in items))


def _item_key(item):
    if _is_simple(item):
        return item
    if isinstance(item, (list, tuple)):
        return tuple(_item_key(part) for part in item)
    return ("id", id(item))


def block_tree(block):
    """The block and all its descendants."""
    blocks = [block]
    for child in block._children.values():
        blocks += block_tree(child)
    return blocks


def as_list(value):
    return list(value) if isinstance(value, (list, tuple)) else [value]


def like(value, items):
    """`items` in the container type of `value` (a single item for a bare array)."""
    return items[0] if not isinstance(value, (list, tuple)) else type(value)(items)


def is_tensor_value(value):
    """An array, or a non-empty list or tuple of arrays (state kept on a block)."""
    return isinstance(value, _TENSORS) or (
        isinstance(value, (list, tuple)) and value and all(isinstance(v, _TENSORS) for v in value))


def _holds_tensors(value):
    return any(isinstance(v, _TENSORS) for v in as_list(value))


def public_attributes(block, keep=lambda value: True):
    """path -> (owner, attribute, value) for the public attributes of the block tree
    whose value `keep` accepts."""
    found = {}

    def visit(node, path):
        for name, value in sorted(vars(node).items()):
            if not name.startswith("_") and keep(value):
                found[path + name] = (node, name, value)
        for child_name, child in node._children.items():
            visit(child, path + child_name + ".")

    visit(block, "")
    return found


def tensor_attributes(block):
    """Public attributes of the block tree holding an array or a list/tuple of arrays."""
    return public_attributes(block, is_tensor_value)


def owner_of(block, path):
    """(block, attribute name) of an attribute path such as "encoder.state"."""
    node = block
    *children, attr = path.split(".")
    for child in children:
        node = node._children[child]
    return node, attr


class StateChanged(Exception):
    """A trace changed Python numbers kept on blocks (`self.count += 1`), or appended
    to a list of arrays kept on them (a log, not state it replaces): traced again
    with those as number state (graph inputs and outputs) or as containers
    (deferred.py), it can hold them."""

    def __init__(self, numbers=(), containers=()):
        super().__init__("the forward changes %s" % ", ".join(sorted(set(numbers) |
                                                                     set(containers))))
        self.numbers, self.containers = set(numbers), set(containers)


class Rollback:
    """Context manager around a trace: whatever stops the trace, the block tree's
    attributes and the lists, dicts and sets it and the module hold are as before.

    A trace that completes must still leave no side effect: `keep_graph_state()`
    undoes the tensor attributes it assigned (they are written back after each
    run), and, after undoing everything, raises StateChanged if it changed
    numbers kept on blocks that are not yet number state (`number_paths`), and
    FallbackRequired if it stored graph values into containers or changed other
    Python values."""

    def __init__(self, block, where, number_paths=frozenset()):
        self.block, self.where = block, where
        self.number_paths = number_paths
        self.saved = public_attributes(block)
        self.containers = [(container, container.copy()) for container in
                            [value for _, _, value in self.saved.values()
                             if isinstance(value, (list, dict, set))] + global_containers()]
        self.values_before = python_state(block)

    def __enter__(self):
        return self

    def __exit__(self, error_type, error, traceback):
        if error_type is not None:
            self.undo(everything=True)

    def keep_graph_state(self):
        numbers = self._changed_numbers()
        self.undo(everything=False)
        if numbers:
            self.undo(everything=True)
            raise StateChanged(numbers=numbers)
        leaked = self._holding_symbols()
        if leaked:
            self.undo(everything=True)
            raise tracing.FallbackRequired(
                "the forward stores graph values into %s (a %s it keeps), which a graph cannot "
                "write back" % leaked, self.where)
        before = dict(self.values_before)
        changed = [name for name, value in python_state(self.block)
                   if name in before and before[name] != value]
        if changed:
            # A graph cannot replay Python side effects: the forward runs as Python
            # (from this call on, so that they happen once per call).
            self.undo(everything=True)
            raise tracing.FallbackRequired("the forward changes Python state (%s) while it runs"
                                           % ", ".join(changed), self.where)

    def undo(self, everything):
        """Put public attributes back as they were: all of them (and the containers'
        contents), or only those holding arrays or Symbols."""
        for path, (owner, attr, value) in public_attributes(self.block).items():
            if path not in self.saved and (everything or _holds_tensors(value)):
                delattr(owner, attr)
        for path, (owner, attr, value) in self.saved.items():
            now = vars(owner).get(attr, _MISSING)
            if now is not value and (everything or _holds_tensors(value) or _holds_tensors(now)):
                setattr(owner, attr, value)
        if everything:
            # Refilled unconditionally: comparing contents would compare arrays elementwise.
            for container, contents in self.containers:
                container.clear()
                if isinstance(container, list):
                    container.extend(contents)
                else:
                    container.update(contents)

    def _changed_numbers(self):
        """Block attributes that held a Python number and now hold another one, or a
        graph value (a number a branch on a tensor changes)."""
        changed = []
        for path, (owner, attr, value) in self.saved.items():
            now = vars(owner).get(attr, _MISSING)
            if path not in self.number_paths and isinstance(value, NUMBER_TYPES) and (
                    isinstance(now, mx.sym.Symbol) or
                    (isinstance(now, NUMBER_TYPES) and now != value)):
                changed.append(path)
        return changed

    def _holding_symbols(self):
        """(name, kind) of the first attribute or kept container the trace left a Symbol in."""
        for path, (_, _, value) in public_attributes(self.block).items():
            if isinstance(value, mx.sym.Symbol):
                return path, "attribute"
        for container, _ in self.containers:
            values = container.values() if isinstance(container, dict) else container
            if any(isinstance(v, mx.sym.Symbol) for v in values):
                return "a container", type(container).__name__
        return None
