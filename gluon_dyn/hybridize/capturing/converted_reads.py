"""What converted code reads from outside its arguments: module globals and the
cells of enclosing functions. The transpiler notes them as it converts a function;
python_state.py snapshots and compares them, since a forward may change them.
A block's cache key holds the globals read in the modules of its own converted code
(ModulesRead), not in every module the process converted."""
import functools
import sys

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


def global_reads(modules=None):
    """(module globals, names its converted functions read), per module; of the
    modules in `modules` (a ModulesRead) only, if given."""
    if modules is None or modules.everything:
        return list(_global_reads.values())
    return [reads for key, reads in _global_reads.items() if key in modules.ids]


class ModulesRead:
    """The modules (their globals, by id) of a block's converted code: those of the
    functions converted for it, and of every callable its traces called (converted
    code calls through converted_call, which notes them); `everything` once a trace
    called something whose module cannot be told."""

    def __init__(self, functions=()):
        self.ids = set()
        self.everything = False
        for function in functions:
            self.note(function)

    def note(self, called):
        namespaces = _globals_of(called)
        if namespaces is None:
            self.everything = True
        else:
            self.ids.update(map(id, namespaces))


# The methods a call of an object runs: a block's forward (or hybrid_forward, when a
# dynamic child's runner inlines its converted code in its parent's trace), which its
# class may inherit from another module's.
_CALLED_METHODS = ("__call__", "forward", "hybrid_forward")


def _globals_of(called):
    """The module globals `called`'s code reads: a function's own; a bound method's,
    a partial's function's; else those of its module and of the methods a call of it
    runs (a callable object, a block, a class, a builtin); None where not told."""
    if isinstance(called, functools.partial):
        return _globals_of(called.func)
    function = getattr(called, "__func__", called)
    namespace = getattr(function, "__globals__", None)
    if isinstance(namespace, dict):
        return [namespace]
    module = sys.modules.get(getattr(called, "__module__", None) or "") or \
        sys.modules.get(type(called).__module__)
    if module is None:
        return None
    methods = [getattr(type(called), name, None) for name in _CALLED_METHODS]
    if isinstance(called, type):    # a class called makes an object: its __init__ runs
        methods.append(called.__init__)
    return [vars(module)] + [method.__globals__ for method in methods
                             if isinstance(getattr(method, "__globals__", None), dict)]


def closure_cells():
    """(name, cell) of the variables of enclosing functions that converted functions use."""
    return [variable for cells in _closure_cells.values() for variable in cells]
