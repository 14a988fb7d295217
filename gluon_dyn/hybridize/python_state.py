"""The Python state of a block tree: what a forward may branch on (part of the cache
key), the arrays kept on blocks (graph inputs and outputs), and the rollback that
leaves a trace without side effects."""
import mxnet as mx

from . import tracing
from .transpiler import global_containers, global_state

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


def _block_state(block):
    values = []

    def visit(node, path):
        # Filtered before sorting: a Gluon block holds many private attributes.
        for name, value in sorted((name, value) for name, value in vars(node).items()
                                  if name[0] != "_" and not isinstance(value, _SKIPPED_TYPES)):
            if _is_simple(value):
                values.append((path + name, value))
            elif isinstance(value, (list, dict, set)):
                values.append((path + name, ("len", len(value))))
        for child_name, child in node._children.items():
            # Which block: a replaced layer is a different graph (its parameters
            # are graph inputs). Graphs keep their blocks alive, so ids stay unique.
            values.append((path + child_name, ("block", id(child))))
            visit(child, path + child_name + ".")

    visit(block, "")
    return tuple(values)


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


def _is_tensor_value(value):
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
    return public_attributes(block, _is_tensor_value)


def owner_of(block, path):
    """(block, attribute name) of an attribute path such as "encoder.state"."""
    node = block
    *children, attr = path.split(".")
    for child in children:
        node = node._children[child]
    return node, attr


class NumbersChanged(Exception):
    """A trace changed Python numbers kept on blocks (`self.count += 1`): traced
    again with them as number state (graph inputs and outputs), it can hold them."""

    def __init__(self, paths):
        super().__init__("the forward changes %s" % ", ".join(sorted(paths)))
        self.paths = set(paths)


class Rollback:
    """Context manager around a trace: whatever stops the trace, the block tree's
    attributes and the lists, dicts and sets it and the module hold are as before.

    A trace that completes must still leave no side effect: `keep_graph_state()`
    undoes the tensor attributes it assigned (they are written back after each
    run), and, after undoing everything, raises NumbersChanged if it changed
    numbers kept on blocks that are not yet number state (`number_paths`), and
    FallbackRequired if it stored graph values into containers or changed other
    Python values."""

    def __init__(self, block, number_paths=frozenset()):
        self.block = block
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
            raise NumbersChanged(numbers)
        leaked = self._holding_symbols()
        if leaked:
            self.undo(everything=True)
            raise tracing.FallbackRequired(
                "the forward stores graph values into %s (a %s it keeps), which a graph cannot "
                "write back" % leaked, type(self.block).__name__)
        before = dict(self.values_before)
        changed = [name for name, value in python_state(self.block)
                   if name in before and before[name] != value]
        if changed:
            # A graph cannot replay Python side effects: the forward runs as Python
            # (from this call on, so that they happen once per call).
            self.undo(everything=True)
            raise tracing.FallbackRequired("the forward changes Python state (%s) while it runs"
                                           % ", ".join(changed), type(self.block).__name__)

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
