"""The Python state of a block tree: what a forward may branch on, and what a trace
must leave untouched."""
import mxnet as mx

from .transpiler import global_containers, global_state

_SIMPLE_TYPES = (bool, int, float, str, type(None))
# Public attributes never branched on as values: child blocks (keyed by identity
# below) and parameters (graph inputs).
_SKIPPED_TYPES = (mx.gluon.Block, mx.gluon.Parameter)


def _is_simple(value):
    return isinstance(value, _SIMPLE_TYPES) or (
        isinstance(value, tuple) and all(_is_simple(item) for item in value))


def python_state(block):
    """The Python values a forward may branch on: those of the block tree, and the
    module-level values converted code reads."""
    return _block_state(block) + global_state()


def changed_values(before, after):
    """Names whose value differs between two python_state() snapshots (names first
    seen in `after`, from functions converted meanwhile, are not changes)."""
    old = dict(before)
    return [name for name, value in after if name in old and old[name] != value]


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


def _is_tensor_value(value):
    tensors = (mx.nd.NDArray, mx.sym.Symbol)
    return isinstance(value, tensors) or (
        isinstance(value, (list, tuple)) and value and all(isinstance(v, tensors) for v in value))


def as_list(value):
    return list(value) if isinstance(value, (list, tuple)) else [value]


def like(value, items):
    return items[0] if not isinstance(value, (list, tuple)) else type(value)(items)


def tensor_attributes(block):
    """Public attributes of the block tree holding an array or a list/tuple of arrays:
    path -> (owner, attribute, value)."""
    found = {}

    def visit(node, path):
        for name, value in sorted(vars(node).items()):
            if not name.startswith("_") and _is_tensor_value(value):
                found[path + name] = (node, name, value)
        for child_name, child in node._children.items():
            visit(child, path + child_name + ".")

    visit(block, "")
    return found


_MISSING = object()


def public_attributes(block):
    """path -> (owner, attribute, value) for every public attribute of the block tree."""
    found = {}

    def visit(node, path):
        for name, value in vars(node).items():
            if not name.startswith("_"):
                found[path + name] = (node, name, value)
        for child_name, child in node._children.items():
            visit(child, path + child_name + ".")

    visit(block, "")
    return found


def _holds_tensors(value):
    return any(isinstance(v, (mx.nd.NDArray, mx.sym.Symbol)) for v in as_list(value))


def restore(block, saved, everything):
    """Put public attributes back as they were before the trace: all of them, or only
    those holding arrays or Symbols (tensor state is written back after a run)."""
    for path, (owner, attr, value) in public_attributes(block).items():
        if path not in saved and (everything or _holds_tensors(value)):
            delattr(owner, attr)
    for path, (owner, attr, value) in saved.items():
        now = vars(owner).get(attr, _MISSING)
        if now is not value and (everything or _holds_tensors(value) or _holds_tensors(now)):
            setattr(owner, attr, value)


def container_contents(block):
    """Shallow copies of the lists, dicts and sets a trace might change."""
    containers = [value for _, _, value in public_attributes(block).values()
                  if isinstance(value, (list, dict, set))]
    containers += global_containers()
    return [(container, container.copy()) for container in containers]


def holding_symbols(block, containers):
    """(name, kind) of the first attribute or kept container a trace left a Symbol in."""
    for path, (_, _, value) in public_attributes(block).items():
        if isinstance(value, mx.sym.Symbol):
            return path, "attribute"
    for container, _ in containers:
        values = container.values() if isinstance(container, dict) else container
        if any(isinstance(v, mx.sym.Symbol) for v in values):
            return "a container", type(container).__name__
    return None


def restore_contents(saved):
    # Refilled unconditionally: comparing contents would compare arrays elementwise.
    for container, contents in saved:
        container.clear()
        if isinstance(container, list):
            container.extend(contents)
        else:
            container.update(contents)


def owner_of(block, path):
    node = block
    *children, attr = path.split(".")
    for child in children:
        node = node._children[child]
    return node, attr
