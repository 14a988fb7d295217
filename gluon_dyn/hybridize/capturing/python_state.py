"""The Python state of a block tree: what a forward may branch on (part of the cache
key), the arrays kept on blocks (graph inputs and outputs), and the rollback that
leaves a trace without side effects.

A block's state is its public attributes and the private ones its own classes set
(`self._prev_output` of Gluon's ZoneoutCell, `self._steps`): everything but the
bookkeeping Gluon's Block, HybridBlock and recurrent cells keep for themselves
(`_children`, `_cached_graph`, a cell's `_counter`, ...).
"""
import itertools
import operator
import weakref

import mxnet as mx
import numpy as np
from mxnet import gluon

from . import tracing
from .host_values import is_host_value
from .converted_reads import closure_cells, global_reads

_SIMPLE_TYPES = (bool, int, float, str, type(None))
NUMBER_TYPES = (bool, int, float)
# Public attributes never branched on as values: child blocks (keyed by identity
# below) and parameters (graph inputs).
_SKIPPED_TYPES = (mx.gluon.Block, mx.gluon.Parameter)
_TENSORS = (mx.nd.NDArray, mx.sym.Symbol)
_MISSING = object()
# Gluon's own bookkeeping on blocks: the private attributes its base classes set
# (a hybridized block's cached graph and CachedOp among them, and a recurrent
# cell's call counter, which only numbers node names).
_GLUON_ATTRIBUTES = frozenset(vars(gluon.rnn.HybridRecurrentCell())) | frozenset(
    vars(gluon.nn.HybridSequential())) | {"_cached_op_args"}


def is_state_attribute(name):
    """Whether a block attribute of this name is the block's Python state."""
    return name[0] != "_" or name not in _GLUON_ATTRIBUTES


def _is_simple(value):
    return isinstance(value, _SIMPLE_TYPES) or (
        isinstance(value, tuple) and all(_is_simple(item) for item in value))


def python_state(block, unkeyed=frozenset(), modules=None):
    """The Python values a forward may branch on: those of the block tree (but the
    attribute paths in `unkeyed`, which graphs take as inputs), and the
    module-level values converted code reads (in `modules`, a ModulesRead, if given)."""
    child_key = getattr(block, "child_key", None)
    if child_key is not None:
        # A block whose children change between calls and whose forward only calls
        # them (a CallBatch): each child by its `child_key` (a loss made anew at each
        # step is the same loss) and its tree by its own walk, kept with it and
        # walked again only where it changed, its paths prefixed with the child's
        # name (two losses both have a `_weight`). Every state path is keyed: the
        # unkeyed ones are the block's own paths through its children.
        items = ()
        for name, child in block._children.items():
            items += ((name, ("block", child_key(child))),) + _named_items(name, child)
        return items + global_state(modules)
    walked = _walked_tree(block)
    return walked.joined(walked.key_items(unkeyed), global_state(modules))


_named = weakref.WeakKeyDictionary()   # child -> (its name, its tree's key items, them named)


def _named_items(name, child):
    """The key items of `child`'s tree, each path prefixed with `name`: made again only
    where the tree's items are other objects (something in it changed)."""
    items = _walked_tree(child).key_items(frozenset())
    named = _named.get(child)
    if named is None or named[0] != name or named[1] is not items:
        named = _named[child] = (name, items, tuple(("%s.%s" % (name, path), value)
                                                    for path, value in items))
    return named[2]


def global_state(modules=None):
    """Module-level values converted code reads that it may branch on (in `modules`,
    a ModulesRead, if given): simple values, and the contents of containers
    (contents_key)."""
    values = ()
    for namespace, names in global_reads(modules):
        keyed = _global_keys.get(id(namespace))
        if keyed is None or keyed.count != len(names):
            keyed = _global_keys[id(namespace)] = _KeyedGlobals(namespace, names)
        values += keyed.key_items(namespace)
    return values


class _KeyedGlobals:
    """The names converted code reads in one module, sorted, and the key items made
    from the values last found there: made again only where a name holds another
    object, or a list, dict or set (they change in place). Every call of every
    dynamic block looks at the names read in the modules of its converted code."""

    def __init__(self, namespace, names):
        module = namespace.get("__name__", "?")
        self.count = len(names)
        self.names = tuple(sorted(names))
        # Qualified: modules may use the same name for different values.
        self.qualified = tuple("%s.%s" % (module, name) for name in self.names)
        self.values = self.items = None
        self.holds_containers = False

    def key_items(self, namespace):
        values = tuple(map(namespace.get, self.names))
        if self.values is None or self.holds_containers or \
                not all(map(operator.is_, values, self.values)):
            items, self.holds_containers = [], False
            for name, value in zip(self.qualified, values):
                if isinstance(value, (bool, int, float, str)):
                    items.append((name, value))
                elif isinstance(value, (list, dict, set)):
                    items.append((name, contents_key(value)))
                    self.holds_containers = True
            self.items, self.values = tuple(items), values
        return self.items


_global_keys = {}   # id(module globals) -> _KeyedGlobals


# A block tree's attributes are walked again only where they changed, not after each
# call of a recurrent cell (its `_counter`) or each graph run writing arrays of the
# same shapes back: a block's version is bumped whenever its state attribute is set
# to a value it is walked otherwise or deleted, and the structure's whenever a child
# is registered (patches.py); `_changes` counts both, so that a tree nothing changed
# in is not looked at block by block. A model that assigns a new list to one block
# on every call (d2l's attention weights) re-walks that block, not its 100 blocks.
# Lists, dicts and sets change in place: their keys are made again when their
# contents changed.
_changes = [0]
_structure = [0]
_versions = weakref.WeakKeyDictionary()     # block -> changes to its walked attributes
_walked = weakref.WeakKeyDictionary()       # block -> _WalkedTree


def noting_block_changes(method):
    """`method` of Block (setting or deleting an attribute, registering a child),
    counting a change of what _walk finds."""
    if method.__name__ not in ("__setattr__", "__delattr__"):
        def counting(self, *args, **kwargs):
            _changes[0] += 1
            _structure[0] += 1
            _versions[self] = _versions.get(self, 0) + 1
            return method(self, *args, **kwargs)
        return counting

    def counting_state(self, name, *value):
        if is_state_attribute(name) and not (
                value and _walked_alike(vars(self).get(name, _MISSING), value[0])):
            _changes[0] += 1
            _versions[self] = _versions.get(self, 0) + 1
        return method(self, name, *value)
    return counting_state


def _walked_alike(old, new):
    """Whether _walk finds the same entry for an attribute holding `new` as for
    `old`: both not walked, equal simple values of the same types, one list, dict
    or set, or arrays of the same shapes and dtypes."""
    if old is new:
        return True
    if isinstance(old, _SKIPPED_TYPES) or isinstance(new, _SKIPPED_TYPES):
        return False
    if _is_simple(old) or _is_simple(new):
        return _is_simple(old) and _is_simple(new) and _same_simple(old, new)
    if isinstance(old, (list, dict, set)) or isinstance(new, (list, dict, set)):
        return False
    if is_tensor_value(old) or is_tensor_value(new):
        return is_tensor_value(old) and is_tensor_value(new) and \
            tensors_key(old) == tensors_key(new)
    return True


def _same_simple(a, b):
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same_simple(x, y) for x, y in zip(a, b))
    return a == b


def forget(block):
    """Drop the walk of `block`'s tree (it holds the blocks below it)."""
    _walked.pop(block, None)


def _walked_tree(block):
    walked = _walked.get(block)
    if walked is None or walked.structure != _structure[0]:
        walked = _walked[block] = _WalkedTree(block)
    elif walked.changes != _changes[0]:
        walked.update()
    return walked


class _WalkedTree:
    """The key items of a block tree: its blocks' (_WalkedBlock), each walked again
    when its version changed."""

    def __init__(self, block):
        self.structure, self.changes = _structure[0], _changes[0]
        self.blocks = [_WalkedBlock(node, path) for node, path in _nodes(block)]
        self.parts = None           # each block's key items, as `keyed` was made from
        self.unkeyed = None         # the unkeyed paths `keyed` left out
        self.keyed = None
        # `changes` when `keyed` was made, where no block holds a list, dict or set:
        # only a counted change can change such a tree's key.
        self.keyed_at = None
        self.holds_containers = any(walked.holds_containers for walked in self.blocks)
        self.join = None            # (tree items, global items, the two as one tuple)

    def joined(self, tree_items, global_items):
        """The tree's key items and the global ones as one tuple: the one given last
        where both parts are the objects it was made from, so that a key made from
        it compares with the next call's state by identity."""
        join = self.join
        if join is None or join[0] is not tree_items or join[1] is not global_items:
            join = self.join = (tree_items, global_items, tree_items + global_items)
        return join[2]

    def update(self):
        self.changes = _changes[0]
        for walked in self.blocks:
            walked.update()
        self.holds_containers = any(walked.holds_containers for walked in self.blocks)

    def key_items(self, unkeyed):
        """The key items of the tree's entries, those of the paths in `unkeyed` left out."""
        if self.keyed_at == self.changes and self.unkeyed == unkeyed:
            return self.keyed
        parts = [walked.key_items(unkeyed) for walked in self.blocks]
        if self.keyed is None or self.unkeyed != unkeyed or \
                not all(map(operator.is_, parts, self.parts)):
            self.parts, self.unkeyed = parts, frozenset(unkeyed)
            self.keyed = tuple(item for part in parts for item in part if item[0] not in unkeyed)
        self.keyed_at = None if self.holds_containers else self.changes
        return self.keyed


class _WalkedBlock:
    """The entries _walk found in one block, and the key items made from them last:
    made again where a list, dict or set among them holds other contents. One holding
    only simple values, which cannot change in place, holds the same contents while
    it holds the same objects (MXNet's layers keep their operators' arguments in a
    dict: 106 of them in a MobileNetV2, checked in C, without a Python step per
    item); others are keyed again at every call, but for those whose paths are
    unkeyed."""

    def __init__(self, node, path):
        self.node, self.path = weakref.ref(node), path
        self.version = None
        self.update()

    def update(self):
        node = self.node()
        if node is None:    # gone from the tree without a change to its structure counted
            return
        version = _versions.get(node, 0)
        if version == self.version:
            return
        self.version = version
        self.entries = _walk_block(node, self.path)
        self.holds_containers = any(container is not None for _, container in self.entries)
        self.items = None           # the key items, as made last
        self.simple = []            # the containers of simple values when keyed
        self.views = []             # ... live views of what they hold (dicts: keys, values)
        self.held = []              # ... what those held then, in order (kept alive)
        self.sizes = []             # ... their sizes then
        self.others = []            # (index in entries, container) of the other containers
        self.unkeyed = None         # the unkeyed paths whose containers were not keyed again

    def key_items(self, unkeyed):
        if self.items is None or not self._simple_unchanged() or (
                unkeyed is not self.unkeyed and unkeyed != self.unkeyed):
            self._key_all()
            self.unkeyed = frozenset(unkeyed)
        elif self.others:
            items = list(self.items)
            for index, container in self.others:
                if items[index][0] not in unkeyed:
                    items[index] = (items[index][0], _mutable_key(container))
            if items != list(self.items):
                self.items = tuple(items)
        return self.items

    def _simple_unchanged(self):
        return list(map(len, self.simple)) == self.sizes and all(
            map(operator.is_, itertools.chain.from_iterable(self.views), self.held))

    def _key_all(self):
        self.items = tuple(item if container is None else (item[0], _mutable_key(container))
                           for item, container in self.entries)
        self.simple, self.views, self.others = [], [], []
        for index, (_, container) in enumerate(self.entries):
            if container is None:
                continue
            values = container.items() if isinstance(container, dict) else container
            if len(container) <= MAX_KEYED_ITEMS and all(_is_simple(value) for value in values):
                self.simple.append(container)
                self.views.extend((container.keys(), container.values())
                                  if isinstance(container, dict) else (container,))
            else:
                self.others.append((index, container))
        self.held = list(itertools.chain.from_iterable(self.views))
        self.sizes = list(map(len, self.simple))


# Tree walks below are loops over a stack, not nested recursive functions: such a
# function refers to itself through its closure, a reference cycle that would
# keep what it found (blocks, arrays) alive until Python's cyclic collector runs.

def _walk_block(node, path):
    """[(key item, the list/dict/set it keys, or None)] of one block's attributes and
    children."""
    entries = []
    # Filtered before sorting: a Gluon block holds many private attributes.
    for name, value in sorted((name, value) for name, value in vars(node).items()
                              if is_state_attribute(name) and
                              not isinstance(value, _SKIPPED_TYPES)):
        if _is_simple(value):
            entries.append(((path + name, value), None))
        elif isinstance(value, (list, dict, set)):
            entries.append(((path + name, None), value))
        elif is_tensor_value(value):    # state: its arrays are graph inputs
            entries.append(((path + name, tensors_key(value)), None))
    for child_name, child in node._children.items():
        # Which block: a replaced layer is a different graph (its parameters
        # are graph inputs). Graphs keep their blocks alive, so ids stay unique.
        entries.append(((path + child_name, ("block", id(child))), None))
    return entries


def _nodes(block):
    """(block, attribute path prefix) of the block tree, depth first, in order."""
    found, pending = [], [(block, "")]
    while pending:
        node, path = pending.pop()
        found.append((node, path))
        pending.extend(reversed([(child, path + name + ".")
                                 for name, child in node._children.items()]))
    return found


def _mutable_key(container):
    # A list of arrays is state (its arrays are graph inputs).
    return tensors_key(container) if is_tensor_value(container) else contents_key(container)


def tensors_key(value):
    """What a graph taking the arrays of `value` (an array, or a list or tuple of
    them) as inputs is specialised to: how many, their shapes and dtypes (a Symbol
    left by a trace in progress: its name)."""
    return ("arrays", tuple((v.shape, v.dtype) if isinstance(v, mx.nd.NDArray) else v.name
                            for v in as_list(value)))


# Items of a container keyed one by one; a larger one is keyed by its length and
# identity (a graph that read its contents would need a key as large).
MAX_KEYED_ITEMS = 256


def contents_key(container):
    """What a graph traced on a list, dict or set of Python values depends on: its
    simple items by value, others (arrays, objects) by identity; graphs keep what
    they captured alive, so identities stay unique."""
    if len(container) > MAX_KEYED_ITEMS:
        return ("large", len(container), id(container))
    # A dict in its order (a forward iterating it sees that order), keyed without
    # repr of its values (d2l's `hparams` holds whole sub-networks); a set's items
    # sorted by the repr of their keys.
    if isinstance(container, set):
        return ("contents", tuple(sorted(map(_item_key, container), key=repr)))
    items = container.items() if isinstance(container, dict) else container
    return ("contents", tuple(_item_key(item) for item in items))


def _item_key(item):
    if _is_simple(item):
        return item
    if isinstance(item, (list, tuple)):
        return tuple(_item_key(part) for part in item)
    return ("id", id(item))


def block_tree(block):
    """The block and all its descendants."""
    return [node for node, _ in _nodes(block)]


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


def state_attributes(block, keep=lambda value: True):
    """path -> (owner, attribute, value) for the state attributes of the block tree
    (is_state_attribute) whose value `keep` accepts."""
    found = {}
    for node, path in _nodes(block):
        for name, value in sorted(vars(node).items()):
            if is_state_attribute(name) and keep(value):
                found[path + name] = (node, name, value)
    return found


def tensor_attributes(block):
    """State attributes of the block tree holding an array or a list/tuple of arrays."""
    return state_attributes(block, is_tensor_value)


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
        self.saved = state_attributes(block)
        # Variables of modules and enclosing functions converted code may rebind
        # (`global`, `nonlocal`), and the containers they hold.
        self.variables = [_GlobalVariable(namespace, name) for namespace, names in global_reads()
                          for name in names] + [_ClosureVariable(name, cell)
                                                for name, cell in closure_cells()]
        for variable in self.variables:
            variable.value = variable.get()
        held = [value for _, _, value in self.saved.values()] + \
            [variable.value for variable in self.variables]
        self.containers = [(container, container.copy())
                           for container in _within(held, (list, dict, set))]
        # NumPy arrays change in place (`self.table += 1`): their contents too.
        self.host_arrays = [(array, array.copy()) for array in _within(held, (np.ndarray,))]
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
        if any(not np.array_equal(array, before, equal_nan=True)
               for array, before in self.host_arrays):
            self.undo(everything=True)
            raise tracing.FallbackRequired("the forward changes a NumPy array it keeps while it "
                                           "runs", self.where)
        rebound = [variable.name for variable in self.variables
                   if variable.get() is not variable.value]
        if rebound:
            self.undo(everything=True)
            raise tracing.FallbackRequired("the forward rebinds %s, a variable outside it, while "
                                           "it runs" % ", ".join(rebound), self.where)
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
        """Put state attributes back as they were: all of them (and the containers'
        contents and the variables outside the forward), or only those holding
        arrays or Symbols."""
        for path, (owner, attr, value) in state_attributes(self.block).items():
            if path not in self.saved and (everything or _holds_tensors(value)):
                delattr(owner, attr)
        for path, (owner, attr, value) in self.saved.items():
            now = vars(owner).get(attr, _MISSING)
            if now is not value and (everything or _holds_tensors(value) or _holds_tensors(now)):
                setattr(owner, attr, value)
        if everything:
            for variable in self.variables:
                variable.set(variable.value)
            for array, before in self.host_arrays:
                np.copyto(array, before)
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
                    isinstance(now, mx.sym.Symbol) or is_host_value(now) or
                    (isinstance(now, NUMBER_TYPES) and now != value)):
                changed.append(path)
        return changed

    def _holding_symbols(self):
        """(name, kind) of the first attribute, kept container or outside variable the
        trace left a Symbol in, at any depth."""
        for path, (_, _, value) in state_attributes(self.block).items():
            if holds_symbol(value):
                return path, "attribute"
        for container, _ in self.containers:
            if holds_symbol(container):
                return "a container", type(container).__name__
        for variable in self.variables:
            if holds_symbol(variable.get()):
                return variable.name, "variable"
        return None


def _within(values, kinds, depth=4):
    """The values of `kinds` among `values` and inside their lists, tuples, dicts and
    sets, `depth` levels down, each once."""
    found, seen, level = [], set(), list(values)
    for _ in range(depth):
        deeper = []
        for value in level:
            if isinstance(value, kinds) and id(value) not in seen:
                seen.add(id(value))
                found.append(value)
            if isinstance(value, (list, tuple, set, frozenset)):
                deeper.extend(value)
            elif isinstance(value, dict):
                deeper.extend(value.values())
        level = deeper
    return found


def holds_symbol(value, depth=4):
    """Whether `value` is a Symbol (or a number read from one, kept in the graph:
    host_values.py) or holds one in its lists, tuples, dicts and sets, `depth` levels
    down."""
    if isinstance(value, mx.sym.Symbol) or is_host_value(value):
        return True
    if depth == 0:
        return False
    if isinstance(value, dict):
        value = value.values()
    elif not isinstance(value, (list, tuple, set, frozenset)):
        return False
    return any(holds_symbol(item, depth - 1) for item in value)


class _GlobalVariable:
    """A module-level variable converted code reads or assigns."""

    def __init__(self, namespace, name):
        self.namespace = namespace
        self.name = "%s.%s" % (namespace.get("__name__", "?"), name)
        self.key = name

    def get(self):
        return self.namespace.get(self.key, _MISSING)

    def set(self, value):
        if value is _MISSING:
            self.namespace.pop(self.key, None)
        else:
            self.namespace[self.key] = value


class _ClosureVariable:
    """A variable of a function enclosing converted code (a closure cell)."""

    def __init__(self, name, cell):
        self.name, self.cell = name, cell

    def get(self):
        try:
            return self.cell.cell_contents
        except ValueError:      # not assigned yet
            return _MISSING

    def set(self, value):
        if value is _MISSING:
            del self.cell.cell_contents
        else:
            self.cell.cell_contents = value
