"""Source-to-source conversion of Python functions, built on diastatic-malt.

malt (AutoGraph's standalone fork) parses the function, runs the static analyses
(activity, liveness, reaching definitions) and rewrites `if`/`while`/`for`,
`break`/`continue`/`return`, conditional and logical expressions into calls of
its runtime operators. gluon_dyn replaces the control-flow operators (see
operators/) so that tensor predicates and tensor iteration become gluon_dyn.ops
graph operators, while Python values keep Python semantics.
"""
# malt 2.15.3 calls importlib.util without importing it.
import contextlib
import importlib.util  # noqa: F401

import malt
from malt.core import config
from malt.impl import api
from mxnet import gluon

from .. import origin
from . import operators
from .converters import (augmented_assignment, binary_operators, context_managers,
                         global_declarations, subscripts)
from .weak_binding import WeakMethod


class Transpiler(api.PyToPy):
    """malt's transformations followed by gluon_dyn's own."""

    def transform_ast(self, node, ctx):
        node = super().transform_ast(node, ctx)
        node = augmented_assignment.transform(node, ctx)
        node = binary_operators.transform(node, ctx)
        node = context_managers.transform(node, ctx)
        node = global_declarations.transform(node, ctx)
        return subscripts.transform(node, ctx)

    def get_extra_locals(self):
        extra = super().get_extra_locals()
        extra["ag__"].converted_call = operators.calls.converted_call
        return extra

    def transform(self, obj, user_context):
        transformed, module, source_map = super().transform(obj, user_context)
        origin.register_source_map(transformed.__code__.co_filename, source_map)
        function = getattr(obj, "__func__", obj)
        if hasattr(function, "__globals__"):
            namespace = function.__globals__
            _, names = _global_reads.setdefault(id(namespace), (namespace, set()))
            names |= _global_names(function.__code__)
        if getattr(function, "__closure__", None):
            _closure_cells[id(function)] = list(zip(function.__code__.co_freevars,
                                                    function.__closure__))
        return transformed, module, source_map


# Library code (MXNet itself, gluon_dyn) runs as written; only user code is converted
# (patches.py installs these rules and the transpiler in malt).
CONVERSION_RULES = (config.DoNotConvert("mxnet"), config.DoNotConvert("gluon_dyn"))

_converted = {}
# id(module globals) -> (module globals, names its converted functions read).
_global_reads = {}
# id(converted function) -> [(name, cell)] of the enclosing functions' variables it uses
# (malt's converted code keeps the functions, and so their cells, alive anyway).
_closure_cells = {}


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


def convert(function):
    """The converted version of `function` (a plain function or an unbound method), cached."""
    key = getattr(function, "__func__", function)
    if key not in _converted:
        _converted[key] = malt.to_graph(key, recursive=True)
    return _converted[key]


def converted_source(function):
    """The Python source malt generates for `function`, for inspection."""
    return malt.to_code(getattr(function, "__func__", function))


def convert_block(block, function=None):
    """Convert what `hybridize(dynamic=True)` runs for `block`; returns (the converted
    forward, unbound, and the names of the converted methods).

    A plain Block's forward (or `function`, a part of it: graph_breaks.py) is
    converted, and its plain child Blocks' forwards in place: code written for
    NDArrays. For a HybridBlock, MXNet's own forward calls hybrid_forward with
    Symbols while tracing: the hybrid_forward methods of the tree's user-written
    HybridBlocks are converted in place (code written for `F`).
    """
    if isinstance(block, gluon.HybridBlock):
        forward, names, method = type(block).forward, [], "hybrid_forward"
        converting = _user_hybrid_blocks(block)
    else:
        function = function or type(block).forward
        forward = convert(function)
        names, method = ["%s.%s" % (type(block).__name__, function.__name__)], "forward"
        converting = _plain_children(block)
    for node in converting:
        setattr(node, method, WeakMethod(convert(getattr(type(node), method)), node))
        names.append("%s.%s" % (type(node).__name__, method))
    return forward, names


@contextlib.contextmanager
def as_written(block, names):
    """The methods convert_block converted in place (`names`, as it returned them) set
    aside while the block runs: the code as written runs, and errors name its lines."""
    set_aside = []
    for node in _tree(block):
        for method in ("forward", "hybrid_forward"):
            # A plain Block's own forward is its runner, kept.
            if "%s.%s" % (type(node).__name__, method) in names and \
                    isinstance(vars(node).get(method), WeakMethod):
                set_aside.append((node, method, vars(node).pop(method)))
    try:
        yield
    finally:
        for node, method, converted in set_aside:
            setattr(node, method, converted)


def _tree(block):
    yield block
    for child in block._children.values():
        yield from _tree(child)


def _user_hybrid_blocks(block):
    """The block and its HybridBlock descendants whose hybrid_forward is user code."""
    if type(block).hybrid_forward.__module__.split(".")[0] != "mxnet":
        yield block
    for child in block._children.values():
        if isinstance(child, gluon.HybridBlock):
            yield from _user_hybrid_blocks(child)


def _plain_children(block):
    for child in block._children.values():
        if not isinstance(child, gluon.HybridBlock):
            yield child
            yield from _plain_children(child)
