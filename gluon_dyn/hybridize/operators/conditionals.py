"""`if` and `a if c else b` in converted code: a cond node for a tensor predicate,
a speculated branch where profiled runs always went one way, Python otherwise.

malt turns each statement into a call with closures for the branches and a pair
of get_state/set_state functions over the variables the statement changes and
that are live after it (from its liveness analysis).
"""
import mxnet as mx
from malt.operators import control_flow as python_statements
from malt.operators.variables import Undefined, UndefinedReturnValue

from ... import ops
from ...ops import ControlFlowError
from ...origin import caller_location
from .. import speculation, tracing
from ..fates import Became, Statement
from . import speculated
from .values import NUMBERS, is_symbol, note_shape, same_python_value


def if_stmt(cond, body, orelse, get_state, set_state, symbol_names, nouts):
    if not is_symbol(cond):
        if isinstance(cond, mx.nd.NDArray):
            speculation.record_branch(caller_location(), cond)
        if tracing.current() is not None:
            tracing.record(caller_location(), Statement.IF, Became.PYTHON, "evaluated in Python")
        return python_statements.if_stmt(cond, body, orelse, get_state, set_state, symbol_names,
                                         nouts)
    where = caller_location()
    taken = tracing.speculate("branch", where)
    if taken is not None:
        return speculated.inline_branch(where, cond, taken, body, orelse)
    tracing.record(where, Statement.IF, Became.GRAPH_OPERATOR, "cond (graph)")
    staged_if(where, cond, body, orelse, get_state, set_state, symbol_names, nouts)


def staged_if(where, cond, body, orelse, get_state, set_state, symbol_names, nouts):
    """The `if` at `where` as a cond node choosing the values of the variables it changes."""
    initial = get_state()

    def run(block):
        set_state(initial)
        block()
        return get_state()[:nouts]

    # A first pass over both branches tells which outputs are tensors (chosen by
    # the graph) and which are Python values the branches must agree on.
    with tracing.staging():
        then_values, else_values = run(body), run(orelse)
    kinds = [_output_kind(where, symbol_names[i], then_values[i], else_values[i])
             for i in range(nouts)]
    # Python numbers on both sides are chosen by an elementwise select, outside the
    # branches (a branch graph reading nothing cannot be run by MXNet's _cond).
    selected = [i for i, kind in enumerate(kinds) if kind == "number" and
                isinstance(then_values[i], NUMBERS) and isinstance(else_values[i], NUMBERS)]
    staged = [i for i, kind in enumerate(kinds) if kind != "python" and i not in selected]
    if not staged and not selected:
        raise tracing.FallbackRequired(
            "this `if` tests a tensor but its branches change no tensor that is used later: "
            "only Python side effects (such as appending to a list) depend on it", where)

    def branch(block, probe, other):
        def traced():
            values = run(block)
            return [_as_branch_output(values[i], probe[i], other[i], kinds[i]) for i in staged]
        return traced

    final = list(then_values) + list(initial[nouts:])
    if staged:
        with tracing.staging():
            chosen = ops.cond(cond, branch(body, then_values, else_values),
                              branch(orelse, else_values, then_values))
        for position, value in zip(staged, chosen):
            final[position] = value
            note_shape(value, then_values[position], else_values[position])
    for position in selected:
        final[position] = mx.sym.where(cond, mx.sym.full(shape=(1,), val=float(then_values[position])),
                                       mx.sym.full(shape=(1,), val=float(else_values[position])))
    set_state(tuple(final))


def _as_branch_output(value, probe, other, kind):
    """A staged output of one branch as a tensor.

    kind "number": Python numbers that differ between the branches, or meet a
    tensor in the other (malt's `break`/`continue`/`return` flags among them),
    become one-element tensors.
    kind "return": a return value the other branch sets; where this branch does
    not return, the value is never read, so zeros of the other's shape stand in.
    """
    if kind == "number" and not is_symbol(value):
        return mx.sym.full(shape=(1,), val=float(value))
    if kind == "return" and isinstance(value, UndefinedReturnValue):
        return mx.sym.zeros(shape=other.shape)
    return value


def _output_kind(where, name, then_value, else_value):
    undefined_return = [isinstance(v, UndefinedReturnValue) for v in (then_value, else_value)]
    if any(undefined_return) and not all(undefined_return):
        defined = else_value if undefined_return[0] else then_value
        if is_symbol(defined):
            return "return"
    for value, branch, other in ((then_value, "else", "then"), (else_value, "then", "else")):
        if isinstance(value, Undefined):
            raise ControlFlowError(
                "%s: `%s` is assigned only in the %s branch of this `if` on a tensor, and read after "
                "it; assign it in the %s branch too, or before the `if`" % (where, name, branch, other))
    tensors = is_symbol(then_value), is_symbol(else_value)
    if all(tensors):
        return "tensor"
    if any(tensors) and any(isinstance(v, NUMBERS) for v in (then_value, else_value)):
        return "number"
    if any(tensors):
        raise tracing.FallbackRequired("`%s` is a tensor in one branch of this `if` on a tensor "
                                       "and a Python value in the other" % name, where)
    if isinstance(then_value, NUMBERS) and isinstance(else_value, NUMBERS) and \
            not same_python_value(then_value, else_value):
        return "number"
    if not same_python_value(then_value, else_value):
        raise tracing.FallbackRequired(
            "`%s` gets different Python values (%r and %r) in the branches of this `if` on a "
            "tensor; a graph can only choose between tensors" % (name, then_value, else_value),
            where)
    return "python"


def if_exp(cond, if_true, if_false, expr_repr):
    if not is_symbol(cond):
        if tracing.current() is not None:
            tracing.record(caller_location(), Statement.IF_EXPRESSION, Became.PYTHON,
                           "evaluated in Python")
        return if_true() if cond else if_false()
    tracing.record(caller_location(), Statement.IF_EXPRESSION, Became.GRAPH_OPERATOR,
                   "cond (graph)")
    return ops.cond(cond, if_true, if_false)
