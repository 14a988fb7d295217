"""`if`, `while` and `for` in converted code: graph operators for tensors, Python otherwise.

malt turns each statement into a call with closures for the blocks and a pair of
get_state/set_state functions over the variables the statement changes and that
are live after it (from its liveness analysis). When the predicate or the
iterable is a Symbol, the blocks are traced into gluon_dyn.ops.cond/while_loop;
otherwise the statement runs as Python, exactly as written.
"""
import mxnet as mx
from malt.operators import control_flow as python_statements
from malt.operators.variables import Undefined, UndefinedReturnValue

from ... import ops
from ...ops import ControlFlowError
from .. import speculation, tracing
from ...origin import caller_location
from .subscripts import get_item, is_symbol

# A graph loop written as a Python `while` has no bound; with no per-step outputs
# gluon_dyn's while_loop allocates nothing for max_iterations, so it is only a bound.
UNBOUNDED = 2 ** 31 - 1


def _same_python_value(a, b):
    if a is b:
        return True
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001 - values without a usable == are not the same
        return False


def _note(statement, fate):
    """Record, while tracing, what the calling statement became (cheap otherwise)."""
    if tracing.current() is not None:
        tracing.record(caller_location(depth=3), statement, fate)


def if_stmt(cond, body, orelse, get_state, set_state, symbol_names, nouts):
    if not is_symbol(cond):
        if isinstance(cond, mx.nd.NDArray):
            speculation.record_branch(caller_location(), cond)
        _note("if", "evaluated in Python")
        return python_statements.if_stmt(cond, body, orelse, get_state, set_state, symbol_names,
                                         nouts)
    where = caller_location()
    taken = tracing.speculate("branch", where)
    if taken is not None:
        # Profiled runs always went this way: inline that branch, guarded.
        holds = mx.sym.broadcast_not_equal(cond, mx.sym.zeros((1,)))
        tracing.add_guard(speculation.Guard(
            where, holds if taken else mx.sym.logical_not(holds),
            "branch at %s went %s, assumed %s" % (where, "else" if taken else "then",
                                                 "then" if taken else "else")))
        tracing.record(where, "if", "inlined the %s branch (speculated, guarded)"
                       % ("then" if taken else "else"))
        return (body if taken else orelse)()
    tracing.record(where, "if", "cond (graph)")
    _staged_if(where, cond, body, orelse, get_state, set_state, symbol_names, nouts)


def _staged_if(where, cond, body, orelse, get_state, set_state, symbol_names, nouts):
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
    numbers = (bool, int, float)
    # Python numbers on both sides are chosen by an elementwise select, outside the
    # branches (a branch graph reading nothing cannot be run by MXNet's _cond).
    selected = [i for i, kind in enumerate(kinds) if kind == "number" and
                isinstance(then_values[i], numbers) and isinstance(else_values[i], numbers)]
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
            _note_shape(value, then_values[position], else_values[position])
    for position in selected:
        final[position] = mx.sym.where(cond, mx.sym.full(shape=(1,), val=float(then_values[position])),
                                       mx.sym.full(shape=(1,), val=float(else_values[position])))
    set_state(tuple(final))


def _note_shape(output, *sources):
    """Tell the trace the run-time shape of a cond/while_loop `output`, from the
    first of `sources` (values it takes) whose shape is known: later code may
    read it (`x.shape`, `x[i]`, `for row in x`), and MXNet cannot infer it."""
    trace = tracing.current()
    for source in sources:
        try:
            shape = trace.inferred_shape(source) if is_symbol(source) else (
                (1,) if isinstance(source, (bool, int, float)) else None)
        except AttributeError:
            continue
        if shape is not None:
            trace.note_control_flow_shape(output, shape)
            return


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
    numbers = (bool, int, float)
    if any(tensors) and any(isinstance(v, numbers) for v in (then_value, else_value)):
        return "number"
    if any(tensors):
        raise tracing.FallbackRequired("`%s` is a tensor in one branch of this `if` on a tensor "
                                       "and a Python value in the other" % name, where)
    if isinstance(then_value, numbers) and isinstance(else_value, numbers) and \
            not _same_python_value(then_value, else_value):
        return "number"
    if not _same_python_value(then_value, else_value):
        raise tracing.FallbackRequired(
            "`%s` gets different Python values (%r and %r) in the branches of this `if` on a "
            "tensor; a graph can only choose between tensors" % (name, then_value, else_value),
            where)
    return "python"


def if_exp(cond, if_true, if_false, expr_repr):
    if not is_symbol(cond):
        _note("conditional expression", "evaluated in Python")
        return if_true() if cond else if_false()
    _note("conditional expression", "cond (graph)")
    return ops.cond(cond, if_true, if_false)


def while_stmt(test, body, get_state, set_state, symbol_names, opts):
    # The loop runs as Python until its test is a tensor; from there on it is a
    # graph loop over the state it has reached.
    where = caller_location()
    iterations = 0
    while True:
        result = test()
        if is_symbol(result):
            trips = tracing.speculate("trip_count", where) if not iterations else None
            if trips is not None:
                return _unrolled_loop(where, trips, result, test, body)
            tracing.record(where, "while", "while_loop (graph) after %d Python iterations"
                           % iterations if iterations else "while_loop (graph)")
            return _staged_loop(where, test, body, get_state, set_state, symbol_names)
        if isinstance(result, mx.nd.NDArray) and not result:
            speculation.record_trip_count(where, iterations)
        if not result:
            tracing.record(where, "while", "evaluated in Python (%d iterations)" % iterations)
            return
        body()
        iterations += 1


def _unrolled_loop(where, trips, first_test, test, body):
    """Profiled runs always made `trips` iterations: unroll them, guarded."""
    result = first_test
    for _ in range(trips):
        _guard_test(where, result, True, trips)
        body()
        result = test()
    _guard_test(where, result, False, trips)
    tracing.record(where, "while", "unrolled %d iterations (speculated, guarded)" % trips)


def _guard_test(where, result, expected, trips):
    holds = mx.sym.broadcast_not_equal(result, mx.sym.zeros((1,)))
    tracing.add_guard(speculation.Guard(
        where, holds if expected else mx.sym.logical_not(holds),
        "loop at %s: trip count differs from %d" % (where, trips)))


def for_stmt(iter_, extra_test, body, get_state, set_state, symbol_names, opts):
    where = caller_location()
    if isinstance(iter_, TensorRange):
        tracing.record(where, "for", "while_loop over a range with tensor bounds (graph)")
        return _staged_range(where, iter_, extra_test, body, get_state, set_state, symbol_names)
    if not is_symbol(iter_):
        return _python_iterable_loop(where, iter_, extra_test, body, get_state, set_state,
                                     symbol_names, opts)
    start = 0
    trace = tracing.current()
    length = _known_length(iter_) if trace is not None and trace.ndarray_code else None
    if length is not None:
        # A Block's graph is specialised to its input shapes, so the number of rows
        # is known: the loop unrolls (lists appended to inside it just work) until
        # a `break` depends on a tensor; the rest is a graph loop.
        for start in range(length):
            more = extra_test() if extra_test is not None else True
            if is_symbol(more):
                break
            if not more:
                tracing.record(where, "for", "unrolled over the rows (shapes are known)")
                return
            body(get_item(iter_, start))
        else:
            tracing.record(where, "for", "unrolled over the rows (shapes are known)")
            return
    tracing.record(where, "for", "while_loop over the rows (graph)" if not start else
                   "unrolled for %d rows, then while_loop (graph) after a tensor `break`" % start)
    _staged_rows(where, iter_, start, extra_test, body, get_state, set_state, symbol_names)


def _python_iterable_loop(where, iter_, extra_test, body, get_state, set_state, symbol_names,
                          opts):
    """A `for` over a Python iterable runs as Python. Once a `break` depends on a
    tensor, every remaining iteration runs under a cond on "no break yet": the
    iterable is finite and known, so this unrolls it."""
    no_break_yet = []

    def test():
        more = extra_test()
        if is_symbol(more):
            no_break_yet[:] = [more]
            return True
        return more

    def guarded_body(item):
        if not no_break_yet:
            return body(item)
        return _staged_if(where, no_break_yet[0], lambda: body(item), lambda: None, get_state,
                          set_state, symbol_names, len(symbol_names))

    python_statements.for_stmt(iter_, test if extra_test is not None else None, guarded_body,
                               get_state, set_state, symbol_names, opts)
    tracing.record(where, "for", "unrolled in Python, iterations after a tensor `break` under "
                   "cond (graph)" if no_break_yet else "evaluated in Python")


def _known_length(tensor):
    """The length of axis 0 when the trace knows it (else the rows go to a graph
    loop, which reads the length at run time)."""
    try:
        return tensor.shape[0]
    except AttributeError:
        return None


class TensorRange:
    """`range(...)` whose bounds include a tensor: iterated by a graph loop."""

    def __init__(self, *bounds):
        start, stop, step = (0, bounds[0], 1) if len(bounds) == 1 else (tuple(bounds) + (1,))[:3]
        if is_symbol(step) or step == 0:
            raise ControlFlowError("range() over tensors needs a nonzero Python int step, got %r"
                                   % (step,))
        self.start, self.stop, self.step = start, stop, step


def _as_tensor(value):
    return value if is_symbol(value) else mx.sym.full(shape=(1,), val=float(value))


def _staged_rows(where, iter_, start, extra_test, body, get_state, set_state, symbol_names):
    """The rows of a tensor from `start` on, as a graph loop over a row index."""
    length = mx.sym.cast(mx.sym.slice_axis(mx.sym.shape_array(iter_), axis=0, begin=0, end=1),
                         dtype="float32")
    _staged_count(where, _as_tensor(start), lambda i: mx.sym.broadcast_lesser(i, length),
                  lambda i: mx.sym.squeeze(mx.sym.take(iter_, i, axis=0), axis=0), 1,
                  extra_test, body, get_state, set_state, symbol_names)


def _staged_range(where, bounds, extra_test, body, get_state, set_state, symbol_names):
    stop = _as_tensor(bounds.stop)
    compare = mx.sym.broadcast_lesser if bounds.step > 0 else mx.sym.broadcast_greater
    _staged_count(where, _as_tensor(bounds.start), lambda i: compare(i, stop), lambda i: i,
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


def _staged_loop(where, test, body, get_state, set_state, symbol_names):
    initial = list(get_state())
    # One pass of the body shows which variables it changes: tensors are carried by
    # the graph loop, Python numbers it changes become tensors, other Python values
    # must stay as they are.
    with tracing.staging():
        body()
    after = list(get_state())
    set_state(tuple(initial))
    carried = []
    for i, (before, now) in enumerate(zip(initial, after)):
        name = symbol_names[i]
        if isinstance(before, Undefined):
            if is_symbol(now):
                raise ControlFlowError("%s: `%s` is assigned in this loop on a tensor but not before "
                                       "it, so its value after zero iterations is undefined; give it "
                                       "an initial value before the loop" % (where, name))
            continue
        if is_symbol(before) or is_symbol(now):
            if isinstance(before, (int, float, bool)):
                initial[i] = mx.sym.full(shape=(1,), val=float(before))
            elif isinstance(before, UndefinedReturnValue):
                # A value returned from inside the loop: before any iteration it is
                # never read (malt's do_return flag guards it), zeros stand in.
                initial[i] = mx.sym.zeros(shape=now.shape)
            elif not is_symbol(before):
                raise tracing.FallbackRequired(
                    "`%s` becomes a tensor in this loop on a tensor but is a Python %s before it"
                    % (name, type(before).__name__), where)
            carried.append(i)
        elif not _same_python_value(before, now):
            if not isinstance(before, (int, float, bool)):
                raise tracing.FallbackRequired(
                    "the loop on a tensor changes the Python value `%s` (%r to %r); a graph loop "
                    "can only carry tensors and numbers" % (name, before, now), where)
            initial[i] = mx.sym.full(shape=(1,), val=float(before))
            carried.append(i)

    def with_carried(values):
        state = list(initial)
        for position, value in zip(carried, values):
            state[position] = value
        return tuple(state)

    def loop_test(*values):
        set_state(with_carried(values))
        return test()

    def loop_body(*values):
        set_state(with_carried(values))
        body()
        state = get_state()
        for i in range(len(state)):
            if i not in carried and not _same_python_value(state[i], initial[i]):
                raise tracing.FallbackRequired("the loop on a tensor changes the Python value "
                                               "`%s`" % symbol_names[i], where)
        # A carried number the body left as a Python value (a `break` flag) is a tensor.
        return [], [_as_tensor(state[i]) if isinstance(state[i], (bool, int, float)) else state[i]
                    for i in carried]

    with tracing.staging():
        _, final = ops.while_loop(loop_test, loop_body, [initial[i] for i in carried],
                                  max_iterations=UNBOUNDED)
    for position, value in zip(carried, final):
        _note_shape(value, initial[position])
    set_state(with_carried(final))
