"""Statements on tensors that profiled runs saw go one way (the JANUS design):
a branch inlined, a loop unrolled, each assumption a guard in the graph."""
from ...capturing import guards, tracing
from ...capturing.fates import Became, Statement
from .values import is_symbol


def inline_branch(where, cond, taken, body, orelse):
    """Profiled runs always took `taken` (True: then) at `where`: trace only that branch."""
    tracing.add_guard(guards.branch_guard(where, cond, taken))
    tracing.record(where, Statement.IF, Became.SPECULATED,
                   "inlined the %s branch (speculated, guarded)" % ("then" if taken else "else"))
    return (body if taken else orelse)()


def unrolled_loop(where, trips, first_test, test, body):
    """Profiled runs always made `trips` iterations at `where`: unroll them, each
    tensor test guarded. A test that is a Python value needs no guard: the loop ends
    where one is false (a `break` in an inlined branch); the return value says
    whether it goes on after the unrolled iterations (one is still true)."""
    result = first_test
    for _ in range(trips):
        if not _expect(where, result, True, trips):
            break
        body()
        result = test()
    else:
        _expect(where, result, False, trips)
    tracing.record(where, Statement.WHILE, Became.SPECULATED,
                   "unrolled %d iterations (speculated, guarded)" % trips)
    return not is_symbol(result) and bool(result)


def _expect(where, result, expected, trips):
    """Guard a tensor loop test; a Python one is what it is."""
    if not is_symbol(result):
        return bool(result)
    tracing.add_guard(guards.loop_test_guard(where, result, expected, trips))
    return expected
