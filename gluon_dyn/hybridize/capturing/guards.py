"""Guards: the assumptions a speculated graph was built on, checked by position.

Each guard contributes one element to the graph's last output, the guard vector:
1 where the assumption held in this run, 0 where it failed. The executor reads
that vector after a run and names the failed guards by their positions in it,
so a failure never depends on an error message.
"""
import dataclasses

import mxnet as mx
import numpy as np


@dataclasses.dataclass
class Guard:
    """One assumption made at `location`: `holds` is a one-element Symbol, nonzero
    exactly when the assumption held in the run."""
    location: str
    holds: mx.sym.Symbol
    failure: str          # what the user reads when it fails
    # A speculative assumption is no longer made once it failed (speculation.py); a
    # bound (how many rows a loop's appends fit) is re-profiled instead.
    speculative: bool = True

    def __post_init__(self):
        # One float32 element, 1 where the assumption held: the guard vector's format.
        self.holds = mx.sym.cast(mx.sym.reshape(self.holds, shape=(1,)), dtype="float32")

    def routed(self, holds):
        """This guard, checked through `holds` (its result carried out of a branch or loop)."""
        return Guard(self.location, holds, self.failure, self.speculative)

    def __str__(self):
        return self.failure


def branch_guard(location, predicate, assumed):
    """The `if` at `location` takes the branch `assumed` (True: then)."""
    taken = truth(predicate)
    return Guard(location, taken if assumed else mx.sym.logical_not(taken),
                 "branch at %s went %s, assumed %s" % (location, "else" if assumed else "then",
                                                      "then" if assumed else "else"))


def loop_test_guard(location, test, expected, trips):
    """The loop test at `location` is `expected` at this point of an unrolled loop of `trips`."""
    result = truth(test)
    return Guard(location, result if expected else mx.sym.logical_not(result),
                 "loop at %s: trip count differs from %d" % (location, trips))


def loop_bound_guard(location, test, bound):
    """The graph loop at `location`, allotted `bound` iterations for its appends, ended
    by itself: its test is false after the loop."""
    return Guard(location, mx.sym.logical_not(truth(test)),
                 "loop at %s ran past the %d iterations allotted to its appends" % (location, bound),
                 speculative=False)


def guard_vector(guards, input_dtypes):
    """The graph output holding every guard's result, in order (float32, one per
    guard); `input_dtypes`: the dtypes of the graph's inputs the trace knows, by
    name, which tell the guards testing values of other dtypes (a float64 model's)."""
    holds = [guard.holds for guard in guards]
    group = mx.sym.Group(holds)
    names = set(group.list_inputs())
    try:
        _, dtypes, _ = group.infer_type_partial(
            **{name: dtype for name, dtype in input_dtypes.items() if name in names})
    except mx.base.MXNetError:
        dtypes = None
    return mx.sym.concat(*[held if dtype in (None, np.float32) else
                           mx.sym.cast(held, dtype="float32")
                           for held, dtype in zip(holds, dtypes or [None] * len(holds))], dim=0)


def failed(guards, vector):
    """The guards whose element of `vector` (a NumPy array read from the run) is 0."""
    return [guard for guard, held in zip(guards, vector) if not held]


def truth(value):
    """1 where the one-element Symbol `value` is nonzero, else 0, in its dtype: a
    float64 model's tests stay float64 (guard_vector makes its guards float32)."""
    return mx.sym._internal._not_equal_scalar(value, scalar=0)
