"""Profiling calls run the forward as written: what its tensor predicates do is
read from their truth tests.

Converted code run imperatively records each `if` and `while` on a tensor at its
statement (speculation.py), but it costs a third more than the code as written
(every call, loop and operator goes through malt's runtime), where the issue
allows a profiling call a fifth. So a profiling call runs the code as written,
and while it runs, MXNet's arrays report their truth tests and row iterations:
`NDArray.__bool__` (and `mx.np.ndarray.__bool__`) and an `NDArray.__iter__` look
up the instruction that asked (predicate_sites.py) and record what it decided:

    if x.sum() > 0:          # the branch taken, as if_stmt records it
    while n.sum() < 50:      # iterations until the test is false, as while_stmt
    for row in x:            # rows the loop entered, as a `for` over a tensor

Outside profiling calls the classes are as MXNet defines them.
"""
import sys
import threading

import mxnet as mx

from . import predicate_sites, speculation
from .predicate_sites import BRANCH, CONTINUES, ROWS, TAKEN

_TESTED = (mx.nd.NDArray, mx.np.ndarray)   # each defines its own __bool__
_ORIGINAL_BOOL = {kind: vars(kind)["__bool__"] for kind in _TESTED}


class _ThreadState(threading.local):
    depth = 0       # profiling calls in progress on this thread
    loops = None    # (id(frame), location) -> (frame, iterations of its `while` so far)


_thread = _ThreadState()
_lock = threading.Lock()
_probing_calls = [0]    # in all threads: the probes are installed while above 0


class profiling_as_written:
    """Context manager: a call as written, its tensor predicates recorded into `profile`."""

    def __init__(self, profile):
        self.recording = speculation.profiling(profile)

    def __enter__(self):
        self.recording.__enter__()
        if _thread.depth == 0:
            _thread.loops = {}
        _thread.depth += 1
        with _lock:
            if _probing_calls[0] == 0:
                for kind in _TESTED:
                    kind.__bool__ = _PROBING_BOOL[kind]
                mx.nd.NDArray.__iter__ = _probing_iter
            _probing_calls[0] += 1

    def __exit__(self, *exc):
        with _lock:
            _probing_calls[0] -= 1
            if _probing_calls[0] == 0:
                for kind in _TESTED:
                    kind.__bool__ = _ORIGINAL_BOOL[kind]
                del mx.nd.NDArray.__iter__
        _thread.depth -= 1
        if _thread.depth == 0:
            _thread.loops = None
        self.recording.__exit__(*exc)


def _recording():
    """The profile this thread's profiling call records into, or None (another
    thread's call installed the probes)."""
    return speculation.current_profile() if _thread.depth else None


def _probing_bool(original):
    def __bool__(self):
        value = original(self)
        profile = _recording()
        if profile is not None:
            frame = sys._getframe(1)
            site = predicate_sites.sites(frame.f_code).get(frame.f_lasti)
            if site is not None and site.outcomes is not None:
                _decided(profile, frame, site, site.outcomes[1 if value else 0])
        return value
    __bool__.__wrapped__ = original
    return __bool__


_PROBING_BOOL = {kind: _probing_bool(original) for kind, original in _ORIGINAL_BOOL.items()}


def _decided(profile, frame, site, outcome):
    if outcome is CONTINUES:
        return
    if site.kind is BRANCH:
        profile.note_branch(site.location, outcome is TAKEN)
        return
    # The frame is kept with its count: a frame made after another returned from
    # inside the loop may have its id.
    key = (id(frame), site.location)
    counted_in, so_far = _thread.loops.pop(key, (None, 0))
    done = 0 if site.starts_loop or counted_in is not frame else so_far
    if outcome is TAKEN:
        _thread.loops[key] = (frame, done + 1)
    else:
        profile.note_trip_count(site.location, done)


def _probing_iter(self):
    rows = _rows(self)
    profile = _recording()
    if profile is None:
        return rows
    frame = sys._getframe(1)
    site = predicate_sites.sites(frame.f_code).get(frame.f_lasti)
    if site is None or site.kind is not ROWS:
        return rows
    return _counted(rows, profile, site.location)


def _rows(array):
    """Python's iteration of a sequence without `__iter__` (MXNet's arrays): items
    0, 1, ... until one raises IndexError."""
    index = 0
    while True:
        try:
            row = array[index]
        except IndexError:
            return
        yield row
        index += 1


def _counted(rows, profile, location):
    """`rows`, the number the loop entered recorded when it ends (exhausted, or
    dropped at a `break`)."""
    entered = 0
    try:
        for row in rows:
            entered += 1
            yield row
    finally:
        profile.note_trip_count(location, entered)
