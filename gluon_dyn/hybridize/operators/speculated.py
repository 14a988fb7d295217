"""Statements on tensors that profiled runs saw go one way (the JANUS design):
a branch inlined, a loop unrolled, each assumption a guard in the graph."""
from .. import guards, tracing
from ..fates import Became, Statement


def inline_branch(where, cond, taken, body, orelse):
    """Profiled runs always took `taken` (True: then) at `where`: trace only that branch."""
    tracing.add_guard(guards.branch_guard(where, cond, taken))
    tracing.record(where, Statement.IF, Became.SPECULATED,
                   "inlined the %s branch (speculated, guarded)" % ("then" if taken else "else"))
    return (body if taken else orelse)()


def unrolled_loop(where, trips, first_test, test, body):
    """Profiled runs always made `trips` iterations at `where`: unroll them, guarded."""
    result = first_test
    for _ in range(trips):
        tracing.add_guard(guards.loop_test_guard(where, result, True, trips))
        body()
        result = test()
    tracing.add_guard(guards.loop_test_guard(where, result, False, trips))
    tracing.record(where, Statement.WHILE, Became.SPECULATED,
                   "unrolled %d iterations (speculated, guarded)" % trips)
