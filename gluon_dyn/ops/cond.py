"""cond: choose between two computations on a scalar tensor predicate."""
import mxnet as mx

from ..origin import user_location
from . import numpy_arrays, subgraph
from .check import SOURCE_ATTR
from .steps import format_text
from .structure import (ControlFlowError, array_kind, check_callable, check_name, describe, flatten,
                        located, regroup)

OP = "cond"


@located
def cond(pred, then_func, else_func, name="cond"):
    """Run `then_func()` if `pred` is true (nonzero), else `else_func()`.

    The semantics, as Python::

        def cond(pred, then_func, else_func):
            return then_func() if bool(pred) else else_func()

    `pred` holds exactly one element. Both functions take no arguments (they close
    over what they need) and return an array or a (nested) list of arrays; the two
    must agree in structure, and in each output's shape and dtype. With NDArrays only
    the chosen function runs; with Symbols (inside `hybrid_forward`) both are traced
    into one `_cond` node and the choice is made when the graph runs. Gradients flow
    through the branch taken to everything it reads. `name` prefixes the subgraphs'
    names (`<name>_pred`, `<name>_then`, `<name>_else`), as in `mx.sym.contrib.cond`.
    In np mode (MXNet's numpy interface) `pred` and the branches' outputs may be np
    arrays or symbols: the outputs are of the kinds the branches return.
    """
    check_callable(then_func, OP, "then_func")
    check_callable(else_func, OP, "else_func")
    check_name(name, OP)
    pred = numpy_arrays.truth(pred)
    then_func, else_func = numpy_arrays.Returned(then_func), numpy_arrays.Returned(else_func)
    kind = array_kind(pred)
    if kind == "ndarray":
        result, ran = _cond_ndarray(pred, then_func, else_func)
        return numpy_arrays.restored(result, ran.kinds)
    if kind == "symbol":
        result = _cond_symbol(pred, then_func, else_func, user_location(), name)
        return numpy_arrays.restored(result, then_func.kinds)
    raise ControlFlowError("cond: pred must be an NDArray or a Symbol holding one element, got %s; "
                           "for a Python value use a Python `if`" % describe(pred))


def _cond_ndarray(pred, then_func, else_func):
    if pred.size != 1:
        raise ControlFlowError("cond: pred must be a scalar (one element), got shape %s" % (pred.shape,))
    taken, branch = (then_func, "then") if pred.asscalar() else (else_func, "else")
    result = taken()
    _branch_outputs(result, branch, "ndarray")
    return result, taken


def _branch_outputs(result, branch, kind):
    """Flatten a branch's result: at least one array, all of the predicate's kind."""
    flat, fmt = flatten(result, OP, "%s_func's output" % branch)
    if not flat:
        raise ControlFlowError("cond: %s_func returns no outputs; cond needs at least one" % branch)
    for i, out in enumerate(flat):
        if array_kind(out) != kind:
            raise ControlFlowError("cond: %s_func's output %d is %s but pred is %s; use NDArrays "
                                   "imperatively or Symbols inside hybrid_forward, not both"
                                   % (branch, i, describe(out), "an NDArray" if kind == "ndarray"
                                      else "a Symbol"))
    return flat, fmt


def _cond_symbol(pred, then_func, else_func, source, name):
    # 1 where pred is nonzero, in float32: MXNet's _cond types its predicate graph's
    # output float32, and a float64 or integer pred failed its type check (so did
    # MXNet's own contrib.cond); compared with zero in its own dtype first, so that
    # no nonzero value rounds to a float32 zero.
    taken = mx.sym.cast(mx.sym.reshape(pred, shape=(1,)) != 0, dtype="float32")
    predicate = subgraph.trace(lambda _: ([taken], []), 0, name + "_pred")
    branches = {}
    for branch, fn in (("then", then_func), ("else", else_func)):
        def trace_branch(_, fn=fn, branch=branch):
            flat, fmt = _branch_outputs(fn(), branch, "symbol")
            branches[branch] = (len(flat), fmt)
            return flat, []
        branches[branch + "_graph"] = subgraph.trace(trace_branch, 0, name + "_" + branch)
    (then_count, then_fmt), (else_count, else_fmt) = branches["then"], branches["else"]
    subgraph.note_conditional_use(taken, [name for name, _ in branches["then_graph"].outer_inputs()])
    subgraph.note_conditional_use(1 - taken,
                                  [name for name, _ in branches["else_graph"].outer_inputs()])
    if then_fmt != else_fmt:
        raise ControlFlowError("cond: then_func returns %d outputs structured as %s but else_func "
                               "returns %d structured as %s; both branches must return the same structure"
                               % (then_count, format_text(then_fmt), else_count, format_text(else_fmt)))
    then_graph, else_graph = branches["then_graph"], branches["else_graph"]
    then_graph, else_graph = (
        subgraph.ensure_gradient_flow(graph, _missing_inputs(graph, other))
        for graph, other in ((then_graph, else_graph), (else_graph, then_graph)))
    inputs = subgraph.InputUnion()
    no_placeholders = {}
    locations = [inputs.locations(g, no_placeholders) for g in (predicate, then_graph, else_graph)]
    subgraph.note_dynamic_shape_node()
    node = mx.sym._internal._cond(
        predicate.graph, then_graph.graph, else_graph.graph, *inputs.symbols,
        cond_input_locs=locations[0], then_input_locs=locations[1], else_input_locs=locations[2],
        num_outputs=then_count, attr={SOURCE_ATTR: source})
    return regroup([node[i] for i in range(then_count)], then_fmt)


def _missing_inputs(graph, other):
    """(name, source) of the inputs `other` reads and `graph` does not."""
    have = set(graph.input_names)
    return [(name, source) for name, source in other.outer_inputs() if name not in have]
