"""The whole-call programs kept (call_program.py), by schedule key, most
recently used first, at most MAX_PROGRAMS: keys follow the trees' heights, so
a stream of distinct trees needs a handful, and never one per tree.

MXNet plans a graph's memory and operators again whenever its input shapes
change: for a program of a dozen groups that costs more than its kernels (0.2
to 0.3 ms a call). For inference, a program's groups are therefore given the
most rows any call gave them so far (their capacities, schedule.py): the shapes
settle after a few calls, at the cost of the rows past the widest groups (at
most as many as the call's own). Training runs the exact rows (a padded row's
gradient would be zero times whatever the body's derivative is at zeros, which
need not be finite).

Building a program costs a few calls run group by group, so a key gets its
program at its second call, or when most recent calls found no program (keys
that hardly repeat: new trees with many bodies per height) at its fourth
(SIGHTINGS; its calls until then run group by group, whose static graphs warm
up meanwhile), so that programs are built only for the keys that recur.
"""
import collections

from .call_program import CallProgram
from .execution import GraphRunner

MAX_PROGRAMS = 32    # programs kept
RECENT_CALLS = 16    # calls over which the share of calls that found no program is counted
SIGHTINGS = (2, 4)   # the call of a key that builds it: most recent calls found a program, or not


class ProgramCache:
    """The programs of one engine; `calls` run as programs, programs `built`, and
    the rows inference calls ran on (`rows`) and past their nodes (`padding`)."""

    def __init__(self):
        self._programs = collections.OrderedDict()   # schedule key -> Program
        self._missed = collections.deque(maxlen=RECENT_CALLS)   # per recent call: no program
        self._unbuilt = collections.Counter()    # key -> its calls run group by group
        self.calls = self.built = 0
        self.rows = self.padding = 0

    def get(self, key):
        """The Program of `key`, or None: run the call group by group."""
        program = self._programs.get(key)
        self._missed.append(program is None)
        if program is None:
            missing = len(self._missed) == RECENT_CALLS and 2 * sum(self._missed) > RECENT_CALLS
            if self._unbuilt[key] + 1 < SIGHTINGS[missing]:
                self._unbuilt[key] += 1
                if len(self._unbuilt) > 8 * MAX_PROGRAMS:
                    # Keys seen least drop out (Counter keeps the order they came in).
                    self._unbuilt = collections.Counter(dict(
                        self._unbuilt.most_common(4 * MAX_PROGRAMS)))
                return None
            self._unbuilt.pop(key, None)
            program = self._programs[key] = Program(CallProgram(key))
            self.built += 1
            while len(self._programs) > MAX_PROGRAMS:
                self._programs.popitem(last=False)
        self._programs.move_to_end(key)
        self.calls += 1
        return program

    def capacities(self, program, plan):
        """The rows of each group of `plan`, an inference call of `program`."""
        capacities = program.capacities(plan)
        rows = sum(capacities)
        self.rows += rows
        self.padding += rows - sum(len(group.invocations) for group in plan.groups)
        return capacities

    def report(self):
        return {"calls": self.calls, "built": self.built, "kept": len(self._programs),
                "inference_rows": self.rows, "padding_rows": self.padding}


class Program:
    """A CallProgram's GraphRunner (`runner`) and the rows its groups run on in
    inference (`capacities`, the widest each group was)."""

    def __init__(self, built):
        self.runner = GraphRunner(built.symbol, built.inputs, None, static_shape=True)
        self._capacities = [0] * len(built.key)

    def capacities(self, plan):
        """The rows of each group of `plan` (inference), grown to its widths; or
        its widths when that would more than double its rows (one outlier call
        must not make every later call pay for its width)."""
        widths = [len(group.invocations) for group in plan.groups]
        grown = [max(capacity, width) for capacity, width in zip(self._capacities, widths)]
        self._capacities = widths if sum(grown) > 2 * sum(widths) else grown
        return self._capacities
