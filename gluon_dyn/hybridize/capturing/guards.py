"""Guards: the assumptions a speculated graph was built on, checked by position.

Each guard contributes one element to the graph's last output, the guard vector:
1 where the assumption held in this run, 0 where it failed. The executor reads
that vector after a run and names the failed guards by their positions in it,
so a failure never depends on an error message.
"""
import dataclasses

import mxnet as mx


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
    taken = _truth(predicate)
    return Guard(location, taken if assumed else mx.sym.logical_not(taken),
                 "branch at %s went %s, assumed %s" % (location, "else" if assumed else "then",
                                                      "then" if assumed else "else"))


def loop_test_guard(location, test, expected, trips):
    """The loop test at `location` is `expected` at this point of an unrolled loop of `trips`."""
    result = _truth(test)
    return Guard(location, result if expected else mx.sym.logical_not(result),
                 "loop at %s: trip count differs from %d" % (location, trips))


def loop_bound_guard(location, test, bound):
    """The graph loop at `location`, allotted `bound` iterations for its appends, ended
    by itself: its test is false after the loop."""
    return Guard(location, mx.sym.logical_not(_truth(test)),
                 "loop at %s ran past the %d iterations allotted to its appends" % (location, bound),
                 speculative=False)


def guard_vector(guards):
    """The graph output holding every guard's result, in order (float32, one per guard)."""
    return mx.sym.concat(*[g.holds for g in guards], dim=0)


def failed(guards, vector):
    """The guards whose element of `vector` (a NumPy array read from the run) is 0."""
    return [guard for guard, held in zip(guards, vector) if not held]


def _truth(value):
    return mx.sym.broadcast_not_equal(value, mx.sym.zeros((1,)))
