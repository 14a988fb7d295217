"""`if` and `a if c else b` in converted code: a cond node for a tensor predicate,
a speculated branch where profiled runs always went one way, Python otherwise.

malt turns each statement into a call with closures for the branches and a pair
of get_state/set_state functions over the variables the statement changes and
that are live after it (from its liveness analysis).
"""
import mxnet as mx
from malt.operators import control_flow as python_statements
from malt.operators.variables import Undefined, UndefinedReturnValue

from .... import ops
from ....ops import ControlFlowError
from ....origin import caller_location
from ...capturing import effects, numpy_interface, speculation, tracing
from ...capturing.fates import Became, Statement
from . import probe_findings, speculated
from .values import (NUMBERS, is_int_like, is_number_like, is_symbol, note_shape,
                     same_python_value, zeros_standing_for)


def if_stmt(cond, body, orelse, get_state, set_state, symbol_names, nouts):
    effects.refuse_markers(cond, "tested for truth")
    cond = numpy_interface.truth(cond)
    get_state, set_state = numpy_interface.statement_boundary(get_state, set_state)
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
    """The `if` at `where` as a cond node choosing the values of the variables it
    changes; elements the branches append to lists come out as Conditional ones, and
    guards made inside the branches come out too (true for the branch not taken)."""
    initial = get_state()

    def run(block):
        set_state(initial)
        with effects.EffectFrame() as frame:
            block()
        return get_state()[:nouts], frame

    # A first pass over both branches tells which outputs are tensors (chosen by
    # the graph) and which are Python values the branches must agree on.
    findings = probe_findings.kept(where, initial)
    if findings is None:
        findings, appended = _probe(where, initial, run, body, orelse)
    else:
        appended = {body: [], orelse: []}
    # A value a branch left as it was is this encounter's own.
    then_values, else_values = [
        [initial[i] if value is findings.initial[i] else value for i, value in enumerate(values)]
        for values in findings.outcome[0]]
    probes = dict(zip((body, orelse), findings.outcome[1]))
    inner = dict(zip((body, orelse), findings.inner))
    kinds = [_output_kind(where, symbol_names[i], then_values[i], else_values[i])
             for i in range(nouts)]
    # Python numbers on both sides are chosen by an elementwise select, outside the
    # branches (a branch graph reading nothing cannot be run by MXNet's _cond).
    selected = [i for i, kind in enumerate(kinds) if kind == "number" and
                isinstance(then_values[i], NUMBERS) and isinstance(else_values[i], NUMBERS)]
    staged = [i for i, kind in enumerate(kinds) if kind != "python" and i not in selected]
    traced_guards = {}

    def branch(block, probe, other, other_block):
        def traced():
            with probe_findings.replaying(inner[block]):
                values, frame = run(block)
            own = _extras(where, frame)
            if [is_guard for _, is_guard in own] != [is_guard for _, is_guard in probes[block]]:
                raise tracing.FallbackRequired("the branch appends differently when traced again",
                                               where)
            traced_guards[block] = frame.guards
            stand_ins = [_stand_in(symbol, is_guard)
                         for symbol, is_guard in probes[other_block]]
            own = [symbol for symbol, _ in own]
            return [_as_branch_output(values[i], probe[i], other[i], kinds[i])
                    for i in staged] + (own + stand_ins if block is body else stand_ins + own)
        return traced

    final = list(then_values) + list(initial[nouts:])
    if staged or probes[body] or probes[orelse]:
        with tracing.staging():
            chosen = ops.cond(cond, branch(body, then_values, else_values, orelse),
                              branch(orelse, else_values, then_values, body))
        for position, value in zip(staged, chosen):
            final[position] = value
            note_shape(value, then_values[position], else_values[position])
        taken = effects.flag(cond)
        routed = iter(chosen[len(staged):])
        for block, presence in ((body, taken), (orelse, 1 - taken)):
            for target, items in appended[block]:
                effects.note_append(target)
                target.extend(_present_when(item, _routed(routed, item), presence)
                              for item in items)
            for guard in traced_guards[block]:
                tracing.add_guard(guard.routed(next(routed)))
    for position in selected:
        final[position] = mx.sym.where(cond, mx.sym.full(shape=(1,), val=float(then_values[position])),
                                       mx.sym.full(shape=(1,), val=float(else_values[position])))
    for position in staged + selected:
        # An int on both sides stays one: `seq[n]` after the `if` is a row; another
        # number stays a number (arithmetic.py).
        if is_int_like(then_values[position]) and is_int_like(else_values[position]):
            tracing.scalar_index(final[position])
        elif is_number_like(then_values[position]) and is_number_like(else_values[position]):
            tracing.scalar_float(final[position])
    set_state(tuple(final))


def _probe(where, initial, run, body, orelse):
    """The probe pass over both branches: their ProbeFindings (the variables after
    each, and what each outputs besides them: _extras) and what each appended."""
    inner, values, extras, appended = [], [], [], {}
    with tracing.staging():
        for block in (body, orelse):
            with probe_findings.probing() as found:
                after, frame = run(block)
            inner.append(found)
            values.append(after)
            extras.append(_extras(where, frame))
            appended[block] = frame.appends
    findings = probe_findings.ProbeFindings(where, list(initial), (values, extras), inner)
    # Kept where another encounter's branches give the same: tensors and numbers
    # (this encounter's come from its own graph pass), values left as they were.
    if not (appended[body] or appended[orelse]) and all(
            is_symbol(value) or isinstance(value, NUMBERS) or value is before
            for after in values for value, before in zip(after, initial)):
        probe_findings.keep(findings)
    return findings, appended


def _extras(where, frame):
    """What a branch outputs besides the variables, as (Symbol, whether it is a
    guard's result): the Symbols of each appended element (checked to be graph
    values), then each guard's result."""
    extras = []
    for _, items in frame.appends:
        for item in items:
            if not (is_symbol(item) or effects.is_marker(item) or
                    isinstance(item, effects.CONSTANTS)):
                raise tracing.FallbackRequired(
                    "a branch on a tensor appends a Python %s to a list; arrays and Python "
                    "constants can be kept in the graph" % type(item).__name__, where)
            extras += [(part, False) for part in _parts(item)]
    return extras + [(guard.holds, True) for guard in frame.guards]


def _stand_in(symbol, is_guard):
    """What the branch that did not make `symbol` outputs in its place: for a guard's
    result 1 (it held), for an appended value zeros of its shape (it is absent)."""
    return mx.sym.ones((1,)) if is_guard else zeros_standing_for(symbol)


def _routed(outputs, item):
    """The cond outputs carrying `item` out of its branch (their shapes are the item's)."""
    parts = []
    for probe in _parts(item):
        parts.append(next(outputs))
        note_shape(parts[-1], probe)
    return parts


def _parts(item):
    """The Symbols a branch outputs for one appended element (none for a constant)."""
    if isinstance(item, effects.CONSTANTS):
        return []
    return item.parts() if effects.is_marker(item) else [item]


def _present_when(item, parts, presence):
    """The element a branch appended, routed out of the cond as `parts`, present
    when the branch was taken (`presence`)."""
    if effects.is_marker(item):
        return item.rebuild(parts, presence)
    return effects.Conditional(parts[0] if parts else item, presence)


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
        return zeros_standing_for(other)
    return value


def _output_kind(where, name, then_value, else_value):
    undefined_return = [isinstance(v, UndefinedReturnValue) for v in (then_value, else_value)]
    if any(undefined_return) and not all(undefined_return):
        defined = else_value if undefined_return[0] else then_value
        if is_symbol(defined):
            return "return"
    for value, branch, other in ((then_value, "else", "then"), (else_value, "then", "else")):
        if isinstance(value, Undefined):
            if tracing.current() is not None:
                # The program may never read it where it is unassigned (malt's liveness
                # is conservative, and Python raises if it does): the `if` runs as Python.
                raise tracing.FallbackRequired(
                    "`%s` is assigned only in the %s branch of this `if` on a tensor and may "
                    "be read after it" % (name, branch), where, breakable=True)
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
    effects.refuse_markers(cond, "tested for truth")
    cond = numpy_interface.truth(cond)
    if not is_symbol(cond):
        if tracing.current() is not None:
            tracing.record(caller_location(), Statement.IF_EXPRESSION, Became.PYTHON,
                           "evaluated in Python")
        return if_true() if cond else if_false()
    tracing.record(caller_location(), Statement.IF_EXPRESSION, Became.GRAPH_OPERATOR,
                   "cond (graph)")
    return ops.cond(cond, if_true, if_false)
