"""`while` and `for` in converted code: a while_loop node when the test or the
iterable is a tensor, an unrolled loop where the trip count is known (profiled
and guarded, or from shapes known while tracing), Python otherwise.

malt turns each loop into a call with closures for the test and the body and a
pair of get_state/set_state functions over the variables the loop changes.
"""
import functools

import mxnet as mx
from malt.operators import control_flow as python_statements
from malt.operators.variables import Undefined, UndefinedReturnValue

from .... import ops
from ....ops import ControlFlowError
from ....origin import caller_location
from ...capturing import effects, guards, numpy_interface, speculation, tracing
from ...capturing.fates import Became, Statement
from . import probe_findings, speculated
from .arithmetic import binary_op
from .conditionals import staged_if
from .subscripts import get_item, row_at
from .values import (NUMBERS_AND_SIZES, as_tensor, is_int_like, is_number_like, is_symbol,
                     length_of, note_shape, same_python_value, zeros_standing_for)

# A graph loop written as a Python `while` has no bound; with no per-step outputs
# gluon_dyn's while_loop allocates nothing for max_iterations, so it is only a bound.
UNBOUNDED = 2 ** 31 - 1


def while_stmt(test, body, get_state, set_state, symbol_names, opts):
    # The loop runs as Python until its test is a tensor; from there on it is a
    # graph loop over the state it has reached.
    where = caller_location()
    test = numpy_interface.predicate(test)
    get_state, set_state = numpy_interface.statement_boundary(get_state, set_state)
    iterations = 0
    while True:
        result = test()
        if is_symbol(result):
            trips = tracing.speculate("trip_count", where) if not iterations else None
            if trips is not None:
                if not speculated.unrolled_loop(where, trips, result, test, body):
                    return
                iterations += trips    # a Python test still true: the loop goes on
                continue
            tracing.record(where, Statement.WHILE, Became.GRAPH_OPERATOR,
                           "while_loop (graph) after %d Python iterations" % iterations
                           if iterations else "while_loop (graph)")
            return _staged_loop(where, test, body, get_state, set_state, symbol_names)
        if isinstance(result, mx.nd.NDArray) and not result:
            speculation.record_trip_count(where, iterations)
        if not result:
            tracing.record(where, Statement.WHILE, Became.PYTHON,
                           "evaluated in Python (%d iterations)" % iterations)
            return
        body()
        iterations += 1


def for_stmt(iter_, extra_test, body, get_state, set_state, symbol_names, opts):
    where = caller_location()
    extra_test = numpy_interface.predicate(extra_test)
    get_state, set_state = numpy_interface.statement_boundary(get_state, set_state)
    if isinstance(iter_, TensorRange):
        tracing.record(where, Statement.FOR, Became.GRAPH_OPERATOR,
                       "while_loop over a range with tensor bounds (graph)")
        return _staged_range(where, iter_, extra_test, body, get_state, set_state, symbol_names)
    if isinstance(iter_, TensorRows):
        tracing.record(where, Statement.FOR, Became.GRAPH_OPERATOR,
                       "while_loop over the rows of %s (graph)" % iter_.description)
        return _staged_rows(where, iter_, 0, extra_test, body, get_state, set_state, symbol_names)
    # A Symbol of several outputs stands for a list of arrays (`mx.nd.split` gives one).
    if not is_symbol(iter_) or len(iter_.list_outputs()) > 1:
        effects.refuse_markers(iter_, "iterated over")
        return _python_iterable_loop(where, iter_, extra_test, body, get_state, set_state,
                                     symbol_names, opts)
    start = 0
    trace = tracing.current()
    length = known_length(iter_) if trace is not None and trace.ndarray_code else None
    if length is not None:
        # A Block's graph is specialised to its input shapes, so the number of rows
        # is known: the loop unrolls (lists appended to inside it just work) until
        # a `break` depends on a tensor; the rest is a graph loop.
        for start in range(length):
            more = extra_test() if extra_test is not None else True
            if is_symbol(more):
                break
            if not more:
                break
            body(get_item(iter_, start))
        else:
            more = False
        if not is_symbol(more):
            tracing.record(where, Statement.FOR, Became.UNROLLED,
                           "unrolled over the rows (shapes are known)")
            return
    tracing.record(where, Statement.FOR, Became.GRAPH_OPERATOR,
                   "while_loop over the rows (graph)" if not start else
                   "unrolled for %d rows, then while_loop (graph) after a tensor `break`" % start)
    _staged_rows(where, TensorRows([iter_]), start, extra_test, body, get_state, set_state,
                 symbol_names)


def _python_iterable_loop(where, iter_, extra_test, body, get_state, set_state, symbol_names,
                          opts):
    """A `for` over a Python iterable runs as Python. Once a `break` depends on a
    tensor, every remaining iteration runs under a cond on "no break yet": the
    iterable is finite and known, so this unrolls it."""
    no_break_yet, iterations = [], [0]

    def test():
        more = extra_test()
        if is_symbol(more):
            no_break_yet[:] = [more]
            return True
        return more

    def guarded_body(item):
        iterations[0] += 1
        if not no_break_yet:
            return body(item)
        return staged_if(where, no_break_yet[0], lambda: body(item), lambda: None, get_state,
                         set_state, symbol_names, len(symbol_names))

    python_statements.for_stmt(iter_, test if extra_test is not None else None, guarded_body,
                               get_state, set_state, symbol_names, opts)
    if isinstance(iter_, mx.nd.NDArray):   # profiled rows of a tensor: the bound of its graph loop
        speculation.record_trip_count(where, iterations[0])
    if no_break_yet:
        tracing.record(where, Statement.FOR, Became.GRAPH_OPERATOR, "unrolled in Python, "
                       "iterations after a tensor `break` under cond (graph)")
    else:
        tracing.record(where, Statement.FOR, Became.PYTHON, "evaluated in Python")


def known_length(tensor):
    """The length of axis 0 when the trace knows it (else the rows go to a graph
    loop, which reads the length at run time)."""
    try:
        return tracing.static_shape(tensor)[0]
    except AttributeError:
        return None


class TensorRange:
    """`range(...)` whose bounds include a tensor: iterated by a graph loop."""

    def __init__(self, *bounds):
        start, stop, step = (0, bounds[0], 1) if len(bounds) == 1 else (tuple(bounds) + (1,))[:3]
        start, stop = numpy_interface.as_legacy_number(start), numpy_interface.as_legacy_number(stop)
        if is_symbol(step) or step == 0:
            raise ControlFlowError("range() over tensors needs a nonzero Python int step, got %r"
                                   % (step,))
        self.start, self.stop, self.step = start, stop, step


def _staged_rows(where, rows, start, extra_test, body, get_state, set_state, symbol_names):
    """TensorRows from row `start` on, as a graph loop over a row index."""
    length = rows.length()
    _staged_count(where, as_tensor(start), lambda i: mx.sym.broadcast_lesser(i, length),
                  rows.item, 1, extra_test, body, get_state, set_state, symbol_names)


class TensorRows:
    """The rows of tensors whose length the graph computes when it runs, as a `for`
    over `x`, `zip(x, y)`, `enumerate(x, start)` or `reversed(x)` meets them: the
    tensors iterated together (as many rows as the shortest has), numbered from
    `number_from` (None: not numbered), last row first if `reverse`. A graph loop
    iterates them over a row index."""

    def __init__(self, tensors, number_from=None, reverse=False, description="a tensor"):
        self.tensors, self.number_from, self.reverse = list(tensors), number_from, reverse
        self.description = description

    def length(self):
        lengths = [length_of(tensor) for tensor in self.tensors]
        return functools.reduce(mx.sym.broadcast_minimum, lengths)

    def item(self, index):
        """What the `for` target gets at row `index` (a one-element tensor)."""
        tracing.scalar_index(index)
        position = binary_op(binary_op(self.length(), 1, "-"), index, "-") if self.reverse \
            else index
        rows = [row_at(tensor, position) for tensor in self.tensors]
        row = rows[0] if len(rows) == 1 else tuple(rows)
        if self.number_from is None:
            return row
        return numpy_interface.as_code_number(binary_op(index, self.number_from, "+")), row


def _staged_range(where, bounds, extra_test, body, get_state, set_state, symbol_names):
    stop = as_tensor(bounds.stop)
    compare = mx.sym.broadcast_lesser if bounds.step > 0 else mx.sym.broadcast_greater
    _staged_count(where, as_tensor(bounds.start), lambda i: compare(i, stop),
                  lambda i: numpy_interface.as_code_number(tracing.scalar_index(i)),
                  bounds.step, extra_test, body, get_state, set_state, symbol_names)


def _staged_count(where, start, in_range, item, step, extra_test, body, get_state, set_state,
                  symbol_names):
    """A graph loop over a counter: `body(item(i))` while `in_range(i)` and malt's
    extra_test (from `break`) hold, i advancing by `step`."""
    index = [start]

    def get_indexed_state():
        return (index[0],) + tuple(get_state())

    def set_indexed_state(values):
        index[0] = values[0]
        set_state(tuple(values[1:]))

    def test():
        more = in_range(index[0])
        if extra_test is None:
            return more
        extra = extra_test()
        return mx.sym.broadcast_logical_and(more, extra) if is_symbol(extra) else (more if extra else
                                                                                    more * 0)

    def counted_body():
        body(item(index[0]))
        index[0] = index[0] + step

    _staged_loop(where, test, counted_body, get_indexed_state, set_indexed_state,
                 ("<loop counter>",) + tuple(symbol_names))


def _probe(where, body, get_state, set_state, initial):
    """One pass of the body shows which variables it changes (tensors are carried by
    the graph loop, Python numbers it changes become tensors, other Python values
    must stay as they are), what it appends to lists and the guards it makes: those
    are per-step outputs. (Its findings, and the appends it made.)"""
    with probe_findings.probing() as inner, tracing.staging(), \
            effects.EffectFrame() as probe:
        body()
    findings = probe_findings.ProbeFindings(where, list(initial),
                                            (list(get_state()), len(probe.guards)), inner)
    set_state(tuple(initial))
    if not probe.appends:
        probe_findings.keep(findings)
    return findings, probe.appends


def _staged_loop(where, test, body, get_state, set_state, symbol_names):
    initial = list(get_state())
    findings, probe_appends = probe_findings.kept(where, initial), []
    if findings is None:
        findings, probe_appends = _probe(where, body, get_state, set_state, initial)
    after, guard_count = findings.outcome
    # Ints the body keeps ints (a Python counter) stand for ints inside and after it,
    # and other numbers it keeps numbers stand for numbers.
    numbers = {i: is_int_like(before) and is_int_like(now)
               for i, (before, now) in enumerate(zip(initial, after))
               if is_number_like(before) and is_number_like(now)}
    carried = _carried(where, initial, after, symbol_names)
    number_slots = {k: numbers[position] for k, position in enumerate(carried)
                    if position in numbers}
    appends = _append_structure(where, probe_appends)
    # Per-step outputs need a bound; a step counter tells which of their rows ran.
    counted = bool(appends or guard_count)
    bound = tracing.loop_bound(where) if counted else UNBOUNDED
    body_guards = []

    def with_carried(values):
        state = list(initial)
        for position, value in zip(carried, values):
            state[position] = value
        return tuple(state)

    def loop_test(*values):
        _know_shapes(values, [initial[i] for i in carried])
        _mark_numbers(values, number_slots)
        set_state(with_carried(values))
        return test()

    def loop_body(*values):
        _know_shapes(values, [initial[i] for i in carried])
        _mark_numbers(values, number_slots)
        set_state(with_carried(values))
        with probe_findings.replaying(findings.inner), effects.EffectFrame() as frame:
            body()
        state = get_state()
        for i in range(len(state)):
            if i not in carried and not same_python_value(state[i], initial[i]):
                raise tracing.FallbackRequired("the loop on a tensor changes the Python value "
                                               "`%s`" % symbol_names[i], where)
        if _append_structure(where, frame.appends) != appends or \
                len(frame.guards) != guard_count:
            raise tracing.FallbackRequired("the loop appends differently when traced again", where)
        body_guards[:] = frame.guards
        step_outputs = [part for _, items in frame.appends for item in items
                        for part in (item.parts() if effects.is_marker(item) else [item])]
        step_outputs += [guard.holds for guard in frame.guards]
        # A carried number the body left as a Python value (a `break` flag) is a tensor.
        next_values = [as_tensor(state[i]) if isinstance(state[i], NUMBERS_AND_SIZES)
                       else state[i] for i in carried]
        return step_outputs, next_values + ([values[len(carried)] + 1] if counted else [])

    start = [initial[i] for i in carried] + ([mx.sym.zeros((1,))] if counted else [])
    with tracing.staging():
        outputs, final = ops.while_loop(loop_test, loop_body, start, max_iterations=bound)
    for position, value in zip(carried, final):
        for leaf, start in zip(_leaves(value), _leaves(initial[position])):
            note_shape(leaf, start)
    _mark_numbers(final, number_slots)
    set_state(with_carried(final))
    if counted:
        tracing.current().note_control_flow_shape(final[-1], (1,))   # the step counter
        ran = mx.sym.broadcast_lesser(mx.sym.arange(bound), mx.sym.reshape(final[-1], shape=(1,)))
        probe_parts = [part for _, items in probe_appends for item in items
                       for part in (item.parts() if effects.is_marker(item) else [item])]
        for output, part in zip(outputs, probe_parts):
            _note_stacked_shape(output, part, bound)
        more = test()
        if is_symbol(more) and tracing.current().export is not None and outputs:
            outputs[0] = _failing_past_bound(where, more, bound, outputs[0])
        outputs = iter(outputs)
        _append_rows(appends, outputs, ran, bound)
        for guard in body_guards:   # held in every step that ran
            tracing.add_guard(guard.routed(mx.sym.min(
                mx.sym.reshape(next(outputs), shape=(bound,)) + (1 - ran))))
        if is_symbol(more) and tracing.current().export is None:
            tracing.add_guard(guards.loop_bound_guard(where, more, bound))


def _failing_past_bound(where, more, bound, output):
    """`output` (a loop's per-step outputs, `bound` rows), made to fail the run when the
    loop's test `more` still holds after the loop: an exported graph has no guards, and
    rows cut at the bound would be wrong numbers. MXNet alone runs the check: a row
    taken (mode "raise") at 1 from a one-row array of zeros in `output`'s dtype (added
    to it, any other fails MXNet's type check); the error names the node."""
    zero = mx.sym.zeros_like(mx.sym.slice_axis(mx.sym.contrib.arange_like(output, axis=0),
                                               axis=0, begin=0, end=1))
    taken = mx.sym.take(zero, _truth_index(more), mode="raise",
                        name="loop_at_%s_ran_past_max_iterations_%d" % (
                            where.replace("/", "_").replace(":", "_line"), bound))
    return mx.sym.broadcast_add(output, mx.sym.reshape(taken, shape=(1,)))


def _truth_index(test):
    """0 where the one-element tensor `test` is false, 1 where it is true."""
    return mx.sym.reshape(guards.truth(test), shape=(1,))


def _carried(where, initial, after, symbol_names):
    """Positions of the loop's variables the graph loop carries; numbers among them
    become tensors in `initial`."""
    carried = []
    for i, (before, now) in enumerate(zip(initial, after)):
        name = symbol_names[i]
        if isinstance(before, Undefined):
            if is_symbol(now) and tracing.current().export is not None:
                # Exported, a loop may run zero times where the traced call ran it:
                # imperatively the variable would then be unbound; zeros stand in.
                initial[i] = zeros_standing_for(now)
                carried.append(i)
            elif is_symbol(now):
                raise ControlFlowError("%s: `%s` is assigned in this loop on a tensor but not before "
                                       "it, so its value after zero iterations is undefined; give it "
                                       "an initial value before the loop" % (where, name))
            continue
        if is_symbol(before) or is_symbol(now):
            if isinstance(before, NUMBERS_AND_SIZES):
                initial[i] = as_tensor(before)
            elif isinstance(before, UndefinedReturnValue):
                # A value returned from inside the loop: before any iteration it is
                # never read (malt's do_return flag guards it), zeros stand in.
                initial[i] = zeros_standing_for(now)
            elif not is_symbol(before):
                raise tracing.FallbackRequired(
                    "`%s` becomes a tensor in this loop on a tensor but is a Python %s before it"
                    % (name, type(before).__name__), where)
            carried.append(i)
        elif _tensors(before) and _tensors(now) and _structure(before) == _structure(now):
            carried.append(i)   # a list of tensors (an RNN's [h, c]) carried as one variable
        elif not same_python_value(before, now):
            if not isinstance(before, NUMBERS_AND_SIZES):
                raise tracing.FallbackRequired(
                    "the loop on a tensor changes the Python value `%s` (%r to %r); a graph loop "
                    "can only carry tensors and numbers" % (name, before, now), where)
            initial[i] = as_tensor(before)
            carried.append(i)
    return carried


def _mark_numbers(values, slots):
    """The loop's values at `slots` (slot -> whether an int) stand for ints
    (tracing.scalar_index) or other numbers (tracing.scalar_float)."""
    for slot, is_an_int in slots.items():
        (tracing.scalar_index if is_an_int else tracing.scalar_float)(values[slot])


def _tensors(value):
    """Whether `value` is a tensor or a (nested) non-empty list or tuple of them."""
    if isinstance(value, (list, tuple)):
        return bool(value) and all(_tensors(item) for item in value)
    return is_symbol(value)


def _structure(value):
    return [_structure(item) for item in value] if isinstance(value, (list, tuple)) else None


def _leaves(value):
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def _append_structure(where, appends):
    """[(list, [the kind of each element appended per step])]: an array, an array
    appended under a branch (Conditional) or the appends of an inner loop (Rows)."""
    structure = []
    for target, items in appends:
        kinds = []
        for item in items:
            if not (is_symbol(item) or effects.is_marker(item)):
                raise tracing.FallbackRequired(
                    "a loop on a tensor appends a Python %s to a list; a graph loop keeps "
                    "appended arrays, not Python values" % type(item).__name__, where)
            kinds.append(type(item))
        structure.append((target, kinds))
    return structure


def _append_rows(appends, outputs, ran, bound):
    """Give each list the rows its appends made, from the loop's per-step `outputs`:
    valid where the step ran and, for appends under a branch or in an inner loop,
    where those were. Several appends per step interleave, as they happened."""
    for target, kinds in appends:
        if kinds == [mx.sym.Symbol]:
            rows = effects.Rows(next(outputs), ran)
        else:
            values, valid = [], []
            for kind in kinds:
                value = next(outputs)
                per_step = mx.sym.reshape(ran, shape=(bound, 1))
                if kind is effects.Rows:   # (bound, inner rows, ...) and (bound, inner rows)
                    values.append(value)
                    valid.append(mx.sym.broadcast_mul(next(outputs), per_step))
                    continue
                values.append(mx.sym.expand_dims(value, axis=1))
                valid.append(per_step * mx.sym.reshape(next(outputs), shape=(bound, 1))
                             if kind is effects.Conditional else per_step)
            rows = effects.Rows(mx.sym.reshape(mx.sym.concat(*values, dim=1), shape=(-3, -2)),
                                mx.sym.reshape(mx.sym.concat(*valid, dim=1), shape=(-1,)))
        effects.note_append(target)
        target.append(rows)


def _note_stacked_shape(output, step_value, bound):
    """A per-step output of a graph loop has `bound` rows of `step_value`'s shape."""
    trace = tracing.current()

    def shape():
        try:
            return (bound,) + trace.inferred_shape(step_value)
        except AttributeError:
            return None
    trace.note_control_flow_shape(output, shape)


def _know_shapes(placeholders, initial):
    """A graph loop's variables keep their shapes and dtypes: tell the trace those of
    the placeholders standing for them in the loop's body and test."""
    trace = tracing.current()
    if trace is None:
        return
    for placeholder, value in zip(_leaves(list(placeholders)), _leaves(list(initial))):
        if placeholder.get_children() is None and placeholder.name not in trace.shapes:
            try:
                trace.shapes[placeholder.name] = trace.inferred_shape(value)
            except AttributeError:
                pass
            dtype = tracing.current().inferred_dtype(value)
            if dtype is not None:
                trace.dtypes[placeholder.name] = dtype
