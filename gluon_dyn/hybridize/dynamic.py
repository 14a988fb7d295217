"""`HybridBlock.hybridize(dynamic=True)`: Python control flow in hybrid_forward, run as graphs.

Every user-defined `hybrid_forward` in the block tree is replaced by its
converted version (transpiler.py), so tensor predicates and tensor loops become
graph operators. What stays Python is evaluated while Gluon traces the graph, so
a graph is valid only for the Python values it was traced under: the training
flag and the simple Python attributes of the blocks (flags, counts, container
lengths). Those values key a bounded cache of graphs; a call under new values
traces a new graph instead of reusing one traced under others (the trap of
apache/mxnet#16932). A forward that changes Python state while it runs cannot be
replayed by a graph: such a block is switched back to imperative execution, with
one warning that names the attribute, so its side effects happen on every call.
"""
import collections
import functools
import warnings

from mxnet import autograd, gluon

from ..ops import ControlFlowError
from . import tracing
from .python_state import (changed_values, container_contents, holding_symbols,
                           public_attributes, python_state, restore, restore_contents)
from .transpiler import convert

MAX_GRAPHS = 16
class DynamicState:
    """Per-block bookkeeping: graphs by key, and what happened."""

    def __init__(self, converted):
        self.converted = converted           # names of the converted hybrid_forward methods
        self.graphs = collections.OrderedDict()
        self.current_key = None
        self.traces = 0
        self.fallback = None                 # why the block runs imperatively, if it does
        self.statements = {}                 # "file:line" -> (statement, what it became)

    def report(self, block):
        in_use = 1 if block._cached_op is not None and self.current_key not in self.graphs else 0
        return report_dict(self.converted, len(self.graphs) + in_use, self.traces, self.fallback,
                           self.statements)


def report_dict(converted, cached_graphs, traces, fallback, statements):
    """The public report of a dynamic block (see `report`)."""
    return {"converted": list(converted), "cached_graphs": cached_graphs, "traces": traces,
            "fallback": fallback,
            "statements": {where: "%s: %s" % fate for where, fate in sorted(statements.items())}}


_CACHE_FIELDS = ("_cached_graph", "_cached_op", "_cached_op_args", "_in_format", "_out_format")


def _swap_graph(block, state, key):
    if state.current_key is not None and block._cached_op is not None:
        state.graphs[state.current_key] = tuple(getattr(block, f) for f in _CACHE_FIELDS)
        while len(state.graphs) > MAX_GRAPHS:
            state.graphs.popitem(last=False)
    if key in state.graphs:
        for field, value in zip(_CACHE_FIELDS, state.graphs[key]):
            setattr(block, field, value)
        state.graphs.move_to_end(key)
    else:
        block._clear_cached_op()
    state.current_key = key


def _user_blocks(block):
    if type(block).hybrid_forward.__module__.split(".")[0] != "mxnet":
        yield block
    for child in block._children.values():
        if isinstance(child, gluon.HybridBlock):
            yield from _user_blocks(child)


def make_dynamic(block):
    converted = []
    for node in _user_blocks(block):
        function = convert(type(node).hybrid_forward)
        node.hybrid_forward = function.__get__(node)
        converted.append("%s.hybrid_forward" % type(node).__name__)
    block._gluon_dyn = DynamicState(converted)


def _call_cached_op_with_guards(call_cached_op):
    @functools.wraps(call_cached_op)
    def wrapper(self, *args):
        state = getattr(self, "_gluon_dyn", None)
        if state is None:
            return call_cached_op(self, *args)
        before = python_state(self)
        key = (autograd.is_training(), before)
        if key != state.current_key:
            _swap_graph(self, state, key)
        if self._cached_op is not None:
            return call_cached_op(self, *args)
        trace = tracing.Trace(self.prefix, {}, ndarray_code=False)
        saved, containers = public_attributes(self), container_contents(self)
        try:
            with tracing.tracing(trace):
                out = call_cached_op(self, *args)
            leaked = holding_symbols(self, containers)
            if leaked:
                raise tracing.FallbackRequired(
                    "the forward stores graph values into %s (a %s it keeps), which a graph "
                    "cannot write back" % (leaked[0], leaked[1]), type(self).__name__)
        except BaseException as error:
            # All or nothing: a trace that stops leaves no trace of itself behind.
            restore(self, saved, everything=True)
            restore_contents(containers)
            if isinstance(error, ControlFlowError) or not isinstance(error, Exception):
                raise
            _fall_back(self, state, "%s: %s" % (type(error).__name__, error))
            return self.forward(*args)
        finally:
            state.statements.update(trace.statements)
        state.traces += 1
        changed = changed_values(before, python_state(self))
        if changed:
            _fall_back(self, state, "the forward changes Python attribute%s %s while it runs"
                       % ("s" if len(changed) > 1 else "", ", ".join(changed)))
        return out
    wrapper.gluon_dyn_wrapped = True
    return wrapper


def _fall_back(block, state, reason):
    state.fallback = reason
    warnings.warn("gluon_dyn: %s runs imperatively: %s" % (type(block).__name__, reason),
                  stacklevel=4)
    block._clear_cached_op()
    state.graphs.clear()
    block._active = False


def _hybridize_with_dynamic(hybridize):
    @functools.wraps(hybridize)
    def wrapper(self, active=True, *args, dynamic=False, **kwargs):
        if dynamic and active:
            make_dynamic(self)
        elif hasattr(self, "_gluon_dyn"):
            del self._gluon_dyn
        return hybridize(self, active, *args, **kwargs)
    wrapper.gluon_dyn_wrapped = True
    return wrapper


def _block_hybridize_with_dynamic(hybridize):
    @functools.wraps(hybridize)
    def wrapper(self, active=True, dynamic=False, profile_calls=3, speculate=True,
                max_guard_failures=1, **kwargs):
        from .block_runner import BlockRunner  # it builds on this module
        if dynamic and active:
            self.forward = BlockRunner(self, profile_calls=profile_calls, speculate=speculate,
                                       max_guard_failures=max_guard_failures)
        elif isinstance(vars(self).get("forward"), BlockRunner):
            del self.forward
        return hybridize(self, active, **kwargs)
    wrapper.gluon_dyn_wrapped = True
    return wrapper


def report(block):
    """What `hybridize(dynamic=True)` did with `block`.

    A dict: "converted" (the functions converted), "cached_graphs" and "traces"
    (graphs kept, and traced so far), "fallback" (why the block runs as Python, or
    None) and "statements" ({"file:line": "if: cond (graph)", ...}: what each
    converted statement became when last traced).
    """
    runner = vars(block).get("forward")
    if hasattr(runner, "report"):
        return runner.report()
    state = getattr(block, "_gluon_dyn", None)
    if state is None:
        raise ValueError("%s was not hybridized with dynamic=True" % type(block).__name__)
    return state.report(block)


if not getattr(gluon.HybridBlock.hybridize, "gluon_dyn_wrapped", False):
    gluon.Block.hybridize = _block_hybridize_with_dynamic(gluon.Block.hybridize)
    gluon.HybridBlock.hybridize = _hybridize_with_dynamic(gluon.HybridBlock.hybridize)
    gluon.HybridBlock._call_cached_op = _call_cached_op_with_guards(gluon.HybridBlock._call_cached_op)
