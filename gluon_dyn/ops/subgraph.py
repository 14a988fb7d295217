"""Tracing a Python function into a subgraph for MXNet's `_foreach`/`_while_loop`/`_cond` nodes.

MXNet's own front ends (`mx.sym.contrib.*`) do the same job but name each subgraph
input after the outer symbol it stands for, which breaks when one symbol is passed
twice, and they reject bodies that ignore an input. Here every placeholder gets a
name of its own, unused inputs are kept alive by a cheap one-element output, and
the three operators share one tracer.
"""
import copy
import ctypes
import threading

import mxnet as mx
from mxnet.attribute import AttrScope
from mxnet.base import SymbolHandle, _LIB, check_call

from .. import native
from ..graph_json import UNINFERABLE_OPS, holds_ops
from .gradient_flow import gradient_dead_outputs

_SCOPE_ATTR = "__subgraph_name__"
_open_traces = threading.local()


def note_dynamic_shape_node():
    """Record that a `_cond` or `_while_loop` node is being built.

    In MXNet 1.9.1 those two nodes have no shape inference (their output shapes
    are known only once they run), which `_foreach` cannot hold in its body.
    """
    for trace_state in getattr(_open_traces, "stack", []):
        trace_state["dynamic_shapes"] = True


# Callables giving the number of rows of a Symbol, or None where unknown:
# hybridize(dynamic=True) knows them while it traces (hybridize/capturing/tracing.py).
row_counters = []


def known_rows(symbol):
    """The number of rows of `symbol`: from a row counter, else from the shapes its
    variables declare (`mx.sym.var(name, shape=...)`), else None."""
    for count in row_counters:
        rows = count(symbol)
        if rows is not None:
            return rows
    return _declared_rows(symbol)


def _declared_rows(symbol):
    # MXNet cannot infer the shapes after a _cond or _while_loop, and must not be
    # asked about gluon_dyn's own operators with shapes unknown (native.LIBRARY_OPS).
    if holds_ops(symbol, UNINFERABLE_OPS, nested=False) or holds_ops(symbol, native.LIBRARY_OPS):
        return None
    try:
        shape = symbol.infer_shape_partial()[1][0]
    except mx.base.MXNetError:
        return None
    return shape[0] if shape and 0 not in shape else None


# Callables told, for each cond branch and loop body built, which outer values it
# reads and the condition (a one-element 0/1 Symbol) under which it runs:
# hybridize uses it to leave the gradients of parameters an untaken path reads
# stale, as imperative MXNet does (hybridize/call/stale_gradients.py).
conditional_use_listeners = []


def note_conditional_use(condition, names):
    """The subgraph reading outer values `names` runs only when `condition` is 1.
    Listeners hear of top-level branches and loops only: inside another subgraph
    `condition` is a value of that subgraph, and the enclosing branch or loop,
    which reads the same outer values, is reported with a condition of its own."""
    if not getattr(_open_traces, "stack", []):
        for listener in conditional_use_listeners:
            listener(condition, names)


def _symbol_list(c_api_function, graph):
    count = ctypes.c_int(0)
    handles = ctypes.POINTER(SymbolHandle)()
    check_call(c_api_function(graph.handle, ctypes.byref(handles), ctypes.byref(count)))
    return [mx.sym.Symbol(ctypes.cast(handles[i], SymbolHandle)) for i in range(count.value)]


def _unique_scope_name(base):
    """A subgraph name unique in this process, prefixed by the enclosing subgraph's."""
    scope = getattr(AttrScope._current, "value", None)  # unset in a thread that never entered one
    parent = scope._attr.get(_SCOPE_ATTR, "") if scope is not None else ""
    if parent:
        base = parent + "$" + base
    AttrScope._subgraph_names[base] += 1
    return "%s%d" % (base, AttrScope._subgraph_names[base] - 1)


class Subgraph:
    """One traced function.

    graph:        the Group of output symbols, cut from the enclosing graph
    input_names:  the graph's inputs, in the order MXNet passes them
    sources:      for each input, either an int (the placeholder it stands for) or
                  the outer Symbol that feeds it (a closure value or a parameter)
    num_extra:    outputs added between the leading and trailing outputs only to keep
                  otherwise-unused placeholders in the graph
    has_dynamic_shapes: whether a `_cond` or `_while_loop` node was built inside
    """

    def __init__(self, graph, input_names, sources, num_extra, has_dynamic_shapes=False):
        self.graph = graph
        self.input_names = input_names
        self.sources = sources
        self.num_extra = num_extra
        self.has_dynamic_shapes = has_dynamic_shapes

    def placeholder_position(self, index):
        """Position among this graph's inputs of placeholder `index`."""
        for position, source in enumerate(self.sources):
            if isinstance(source, int) and source == index:
                return position
        raise KeyError("placeholder %d is not an input of this subgraph" % index)

    def outer_inputs(self):
        """(name, Symbol) of every input that comes from outside the subgraph."""
        return [(name, src) for name, src in zip(self.input_names, self.sources)
                if not isinstance(src, int)]


def trace(fn, num_placeholders, name, keep_alive=None):
    """Trace `fn(placeholders) -> (leading outputs, trailing outputs)` into a Subgraph.

    Every output is passed through `identity` (see `_own_outputs`). MXNet also needs every placeholder in the graph: by default each one
    `fn` does not use gets a one-element output (zero times its first element)
    placed between the leading and trailing outputs, differentiable so that MXNet's
    loop backward sees its gradient consumed; `keep_alive(unused, leading, trailing)
    -> (leading, trailing)` may do that differently.
    """
    scope = _unique_scope_name(name)
    trace_state = {"dynamic_shapes": False}
    stack = _open_traces.__dict__.setdefault("stack", [])
    with AttrScope(**{_SCOPE_ATTR: scope}):
        placeholders = [mx.sym.var("%s_in%d" % (scope, i)) for i in range(num_placeholders)]
        stack.append(trace_state)
        try:
            leading, trailing = fn(placeholders)
        finally:
            stack.pop()
        leading, trailing = list(leading), list(trailing)
        used = set(mx.sym.Group(leading + trailing).list_inputs()) if leading + trailing else set()
        unused = [(i, p) for i, p in enumerate(placeholders) if p.name not in used]
        extra = []
        if keep_alive is not None:
            leading, trailing = keep_alive(unused, leading, trailing)
        else:
            extra = [0 * mx.sym.slice_axis(mx.sym.reshape(p, shape=(-1,)), axis=0, begin=0, end=1)
                     for _, p in unused]
        graph = mx.sym.Group(_own_outputs(leading + extra + trailing))
    cut_by_name = {s.list_outputs()[0]: s for s in _symbol_list(_LIB.MXSymbolCutSubgraph, graph)}
    free_by_name = {s.name: s for s in _symbol_list(_LIB.MXSymbolGetInputSymbols, graph)}
    placeholder_index = {p.name: i for i, p in enumerate(placeholders)}
    input_names = graph.list_inputs()
    if len(set(input_names)) != len(input_names):
        raise RuntimeError("subgraph %s has repeated input names %s" % (scope, input_names))
    sources = []
    for input_name in input_names:
        if input_name in placeholder_index:
            sources.append(placeholder_index[input_name])
        elif input_name in cut_by_name:
            sources.append(cut_by_name[input_name])
        else:
            # A variable of the enclosing graph (a parameter or a block input): the
            # subgraph keeps its own node, so the outer graph gets a copy.
            sources.append(copy.deepcopy(free_by_name[input_name]))
    return ensure_gradient_flow(Subgraph(graph, input_names, sources, len(extra),
                                         trace_state["dynamic_shapes"]))


def _own_outputs(outputs):
    """Every output passed through `identity`.

    A subgraph's outputs must be nodes of its own, distinct from its inputs and from
    each other. Beyond that, when a control-flow node is nested in another, MXNet
    1.9.1 infers storage types for the inner node's backward before the gradients
    flowing into it have one ("storage_type_num_unknown_nodes"), unless each output
    gradient first passes through an ordinary operator: identity's backward copy.
    """
    return [mx.sym.identity(out) for out in outputs]


class InputUnion:
    """The operator-level input list shared by several subgraphs of one node.

    Inputs are identified by name: the same outer symbol cut out of two subgraphs
    arrives as two Symbol objects with one name, and must be passed once.
    """

    def __init__(self, leading=()):
        self.symbols = list(leading)
        self._position = {}

    def locations(self, subgraph, placeholder_positions):
        """Operator-input index of each of `subgraph`'s inputs.

        placeholder_positions maps a placeholder index to its operator-input index.
        """
        locs = []
        for name, source in zip(subgraph.input_names, subgraph.sources):
            if isinstance(source, int):
                locs.append(placeholder_positions[source])
                continue
            if name not in self._position:
                self._position[name] = len(self.symbols)
                self.symbols.append(source)
            locs.append(self._position[name])
        return locs


def ensure_gradient_flow(sub, extra_inputs=()):
    """`sub` rewritten so that MXNet's backward can run it.

    Outputs whose gradient would not be consumed (gradient_flow.py) are passed
    through `gluon_dyn_grad_tie` with an input as anchor. `extra_inputs` (name,
    outer Symbol) become inputs of `sub` with a zero gradient: MXNet's `_cond`
    backward runs only the branch taken and leaves the gradient of an input only
    the other branch reads unwritten (a stale value from an earlier step), so each
    branch is given every input of the node.
    """
    outputs = list(sub.graph)
    tied = gradient_dead_outputs(sub.graph)
    if extra_inputs and not tied:
        tied = [0]
    if not tied:
        return sub
    # New inputs get new variables; an existing input is referenced by its own node
    # (a second variable of the same name would be a second input).
    anchors = [mx.sym.var(name) for name, _ in extra_inputs] or \
        [sub.graph.get_internals()[name] for name in sub.input_names[:1]]
    for position, out in zip(tied, native.grad_tie(mx.sym, [outputs[i] for i in tied], anchors)):
        outputs[position] = out
    graph = mx.sym.Group(outputs)
    source_by_name = dict(zip(sub.input_names, sub.sources))
    source_by_name.update(extra_inputs)
    input_names = graph.list_inputs()
    return Subgraph(graph, input_names, [source_by_name[name] for name in input_names], sub.num_extra,
                    sub.has_dynamic_shapes)
