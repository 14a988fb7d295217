"""What converted code reads from outside its arguments: module globals and the
cells of enclosing functions. The transpiler notes them as it converts a function;
python_state.py snapshots and compares them, since a forward may change them."""

# id(module globals) -> (module globals, names its converted functions read).
_global_reads = {}
# id(converted function) -> [(name, cell)] of the enclosing functions' variables it uses
# (malt's converted code keeps the functions, and so their cells, alive anyway).
_closure_cells = {}


def note_globals(function, namespace):
    """Note the global names `function`'s code (nested code included) reads in `namespace`."""
    if namespace is not None:
        _, names = _global_reads.setdefault(id(namespace), (namespace, set()))
        names |= _global_names(function.__code__)


def note_closure(function):
    """Note the cells of the enclosing functions' variables `function` uses."""
    if getattr(function, "__closure__", None):
        _closure_cells[id(function)] = list(zip(function.__code__.co_freevars,
                                                function.__closure__))


def _global_names(code):
    names = set(code.co_names)
    for constant in code.co_consts:
        if hasattr(constant, "co_names"):
            names |= _global_names(constant)
    return names


def global_reads():
    """(module globals, names its converted functions read), per module."""
    return list(_global_reads.values())


def closure_cells():
    """(name, cell) of the variables of enclosing functions that converted functions use."""
    return [variable for cells in _closure_cells.values() for variable in cells]
