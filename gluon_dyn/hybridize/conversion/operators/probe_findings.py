"""The probe pass of a graph loop or branch, done once per encounter of the code
around it, not once per pass over that code.

Before an `if` or a loop on a tensor becomes a cond or while_loop node, a probe
pass over its branches or body shows what they change (loops.py,
conditionals.py); then the node's graph pass traces them again. A construct
inside another is therefore met twice per pass of the outer one, and its own
probe and graph pass ran each time: d constructs deep, the innermost body ran 2^d
times (a generated program of loops and branches on tensors built 6,852 branch
graphs in one trace, 99 s).

The probe's findings are kept for the outer construct's graph pass, which meets
the constructs inside it in the order its probe met them, from the same Python
state (the probe's changes are undone): each takes its findings instead of
probing again, so that the innermost body runs once per pass of each construct
around it, d + 1 times in all.

Findings are taken only where they cannot differ: the same construct
(file:line), the same kinds of values in its variables (tensors, ints standing
for ints or not, equal Python values), no appends in it (a list the outer body
makes is a new list on each pass), and not while exporting (a stand-in for a
value of the other path is zeros like that value, which would reach into the
earlier pass). Anything else probes again.

Equivalent to::

    findings = kept(where, initial)
    if findings is None:
        with probing() as inner:
            outcome = probe()
        findings = ProbeFindings(where, initial, outcome, inner)
        keep(findings)
    with replaying(findings.inner):
        graph_pass()
"""
import dataclasses
import threading
from typing import Any, List

from malt.operators.variables import Undefined, UndefinedReturnValue

from ...capturing import tracing
from .values import is_int_like, is_symbol, same_python_value


@dataclasses.dataclass
class ProbeFindings:
    """What the probe of the construct at `where` showed (`outcome`, the construct's
    own), from its variables' values `initial`; `inner`: the findings of the
    constructs inside it, for its graph pass (the construct's own layout)."""
    where: str
    initial: List[Any]
    outcome: Any
    inner: Any

    def serves(self, where, initial):
        return where == self.where and len(initial) == len(self.initial) and all(
            _same_kind(before, now) for before, now in zip(self.initial, initial))


def _same_kind(recorded, value):
    if is_symbol(recorded) or is_symbol(value):
        return is_symbol(recorded) and is_symbol(value) and \
            is_int_like(recorded) == is_int_like(value)
    if isinstance(recorded, (list, tuple)) and recorded and all(map(is_symbol, recorded)):
        return type(value) is type(recorded) and len(value) == len(recorded) and \
            all(map(is_symbol, value))
    if isinstance(recorded, (Undefined, UndefinedReturnValue)):
        # malt's stand-ins for a variable not yet assigned, new at every encounter.
        return type(value) is type(recorded) and \
            getattr(value, "symbol_name", None) == getattr(recorded, "symbol_name", None)
    return type(recorded) is type(value) and same_python_value(recorded, value)


class _Passes(threading.local):
    def __init__(self):
        self.recording = None   # list: findings of the constructs met in a probe pass
        self.replaying = None   # iterator over the findings kept for this graph pass


_passes = _Passes()


def kept(where, initial):
    """The findings kept for the next construct met in this pass, if they serve one at
    `where` starting from `initial`; else None (probe it)."""
    if _passes.replaying is None:
        return None
    found, trace = next(_passes.replaying, None), tracing.current()
    if found is None or not found.serves(where, initial) or \
            (trace is not None and trace.export is not None):
        _passes.replaying = None     # the pass took another way: probe from here on
        return None
    return found


def keep(findings):
    """Keeps `findings` for the graph pass of the construct around, if it probes."""
    if _passes.recording is not None:
        _passes.recording.append(findings)


class _Pass:
    def __init__(self, recording, replaying):
        self.state = recording, replaying
        self.trace = tracing.current() if recording is not None else None

    def __enter__(self):
        self.outer = _passes.recording, _passes.replaying
        _passes.recording, _passes.replaying = self.state
        if self.trace is not None:
            self.trace.probes += 1
        return self.state[0]

    def __exit__(self, *exc):
        _passes.recording, _passes.replaying = self.outer
        if self.trace is not None:
            self.trace.probes -= 1


def probing():
    """Context manager around a probe pass: gives the list the findings of the
    constructs met inside it go to."""
    return _Pass([], None)


def replaying(inner):
    """Context manager around a graph pass: the constructs met inside it take the
    findings of `inner` (a list kept by `probing`), in order."""
    return _Pass(None, iter(inner))
