"""Source-to-source conversion of Python functions, built on diastatic-malt.

malt (AutoGraph's standalone fork) parses the function, runs the static analyses
(activity, liveness, reaching definitions) and rewrites `if`/`while`/`for`,
`break`/`continue`/`return`, conditional and logical expressions into calls of
its runtime operators. gluon_dyn replaces the control-flow operators (see
operators/) so that tensor predicates and tensor iteration become gluon_dyn.ops
graph operators, while Python values keep Python semantics.
"""
# malt 2.15.3 calls importlib.util without importing it.
import importlib.util  # noqa: F401
import threading
import weakref

import malt
from malt.core import config
from malt.impl import api
from mxnet import gluon

from ... import origin
from ..capturing import converted_reads, host_values
from . import operators
from .converters import (asserts, augmented_assignment, binary_operators, context_managers,
                         global_declarations, item_assignment, subscripts, unpacking)
from ..capturing.weak_binding import WeakMethod


class _CodeIdentityCache:
    """malt's CodeObjectCache (conversions by a function's code object, then by a
    subkey) keyed by the code object itself. malt keys them by its value, and code
    objects compare equal whatever file they come from: a function written the same
    in two files (a model copied into another module, a program loaded twice) got
    the conversion of the first, its lines in the other file (a graph break there
    was "not in the forward", diagnostics named the other file). Functions sharing
    one code object (made in a loop) still share their conversion."""

    def __init__(self):
        self._entries = {}      # id(code) -> (weak reference to the code, {subkey: value})

    def _bucket(self, entity, make):
        code = getattr(entity, "__code__", entity)
        entry = self._entries.get(id(code))
        if entry is not None and entry[0]() is code:
            return entry[1]
        if not make:
            return None
        bucket = {}
        self._entries[id(code)] = (
            weakref.ref(code, lambda _, key=id(code): self._entries.pop(key, None)), bucket)
        return bucket

    def has(self, entity, subkey):
        bucket = self._bucket(entity, make=False)
        return bucket is not None and subkey in bucket

    def __getitem__(self, entity):
        return self._bucket(entity, make=True)

    def __len__(self):
        return len(self._entries)


class Transpiler(api.PyToPy):
    """malt's transformations followed by gluon_dyn's own."""

    def __init__(self):
        super().__init__()
        self._cache = _CodeIdentityCache()

    def transform_ast(self, node, ctx):
        # Before malt: its analyses must see that an item assignment rebinds its name.
        node = item_assignment.transform(node, ctx)
        node = super().transform_ast(node, ctx)
        node = augmented_assignment.transform(node, ctx)
        node = binary_operators.transform(node, ctx)
        node = context_managers.transform(node, ctx)
        node = global_declarations.transform(node, ctx)
        node = asserts.transform(node, ctx)
        node = unpacking.transform(node, ctx)
        return subscripts.transform(node, ctx)

    def get_extra_locals(self):
        extra = super().get_extra_locals()
        extra["ag__"].converted_call = operators.calls.converted_call
        extra["ag__"].asserted = host_values.asserted
        return extra

    def transform(self, obj, user_context):
        transformed, module, source_map = super().transform(obj, user_context)
        function = getattr(obj, "__func__", obj)
        namespace = getattr(function, "__globals__", None)
        # malt makes a new function at every call converted code makes, from code it
        # converted once: what that code reads and where its lines come from is noted once.
        once = (transformed.__code__, id(namespace))
        if once not in _noted:
            _noted.add(once)
            origin.register_source_map(transformed.__code__.co_filename, source_map)
            converted_reads.note_globals(function, namespace)
        converted_reads.note_closure(function)
        return transformed, module, source_map


# Library code (MXNet itself, gluon_dyn) runs as written; only user code is converted
# (patches.py installs these rules and the transpiler in malt).
CONVERSION_RULES = (config.DoNotConvert("mxnet"), config.DoNotConvert("gluon_dyn"))

_converted = {}
# (converted code, id(module globals)) already noted by Transpiler.transform.
_noted = set()


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
    forward, unbound, the names of the converted methods, and the functions
    converted, as written).

    A plain Block's forward (or `function`, a part of it: graph_breaks.py, or
    another method: methods.py) is converted, and the user-written methods of its
    descendants in place (_descendants_run_on_ndarrays): code written for
    NDArrays. For a HybridBlock, MXNet's own forward
    calls hybrid_forward with Symbols while tracing: the hybrid_forward methods of
    the tree's user-written HybridBlocks are converted in place (code written for
    `F`), and `function`, if given, is converted.
    """
    if isinstance(block, gluon.HybridBlock):
        converting = [(node, "hybrid_forward") for node in _user_hybrid_blocks(block)]
    else:
        converting = list(_descendants_run_on_ndarrays(block))
    if isinstance(block, gluon.HybridBlock) and function is None:
        forward, names, functions = type(block).forward, [], []
    else:
        function = function or type(block).forward
        forward = convert(function)
        names, functions = ["%s.%s" % (type(block).__name__, function.__name__)], [function]
    for node, method in converting:
        original = getattr(type(node), method)
        setattr(node, method, ConvertedMethod(convert(original), original, node))
        names.append("%s.%s" % (type(node).__name__, method))
        functions.append(original)
    return forward, names, functions


class _Mode(threading.local):
    written = False     # whether methods converted in place run as written, in this thread


_mode = _Mode()


class ConvertedMethod(WeakMethod):
    """A method convert_block converted in place on its block: the converted code,
    or, inside `as_written()`, the code as written (`original`, unbound)."""

    def __init__(self, function, original, owner):
        super().__init__(function, owner)
        self.original = original

    def __call__(self, *args, **kwargs):
        function = self.original if _mode.written else self.function
        return function(self.owner(), *args, **kwargs)


class _Running:
    """Context manager: methods converted in place run as written, or converted."""

    def __init__(self, written):
        self.written = written

    def __enter__(self):
        self.outer, _mode.written = _mode.written, self.written
        return self

    def __exit__(self, *exc):
        _mode.written = self.outer


def as_written():
    """Context manager: in this thread, every method converted in place runs as written
    (a block that runs as Python runs its own code and its children's, as without
    hybridize, at the same cost, and errors name its lines) until `as_converted()`
    says otherwise (a dynamic block called inside it runs its own converted code)."""
    return _Running(True)


def as_converted():
    """Context manager: methods converted in place run converted (the default)."""
    return _Running(False)


def running_as_written():
    """Whether this thread runs code as written now (inside `as_written()`)."""
    return _mode.written


def _user_hybrid_blocks(block):
    """The block and its HybridBlock descendants whose hybrid_forward is user code."""
    if type(block).hybrid_forward.__module__.split(".")[0] != "mxnet":
        yield block
    for child in block._children.values():
        if isinstance(child, gluon.HybridBlock):
            yield from _user_hybrid_blocks(child)


def _descendants_run_on_ndarrays(block):
    """(block, method name) of the user-written methods below a plain Block, which its
    trace runs where they would run on NDArrays: plain Blocks' forwards, and the
    HybridBlocks' own forwards (GluonNLP's decoders override `forward` with NDArray
    code) and hybrid_forwards (GluonNLP's samplers index with `mx.nd.arange`)."""
    for child in block._children.values():
        if getattr(vars(child).get("forward"), "converts_its_block", False):
            # Hybridized with dynamic=True itself (a model a CallBatch calls,
            # call_batching.py): its runner converted its tree.
            continue
        if not isinstance(child, gluon.HybridBlock):
            yield child, "forward"
        else:
            for method in ("forward", "hybrid_forward"):
                if _user_written(getattr(type(child), method)):
                    yield child, method
        yield from _descendants_run_on_ndarrays(child)


def _user_written(function):
    return function.__module__.split(".")[0] not in ("mxnet", "gluon_dyn")
