"""Speculation from profiled runs (the JANUS design): what tensor predicates did.

While a Block's first calls run imperatively, each `if` on a tensor records the
branch it took and each `while` on a tensor its trip count, by source line. A
trace then inlines a branch that always went one way and unrolls a loop whose
trip count never changed, and adds a guard for each such assumption (guards.py).
A failed guard discards that run (the call runs imperatively instead); an
assumption that has failed `max_failures` times (default 1) is no longer made, so
the next trace builds `cond` / `while_loop` there.
"""
import threading

import mxnet as mx


class _ThreadProfile(threading.local):
    """The profile recording on this thread (a class default: a missing attribute
    read with getattr costs an exception at every predicate)."""
    profile = None


_local = _ThreadProfile()


class Profile:
    """Observed behaviour of tensor predicates, by "file:line"."""

    def __init__(self, max_failures=1):
        self.branches = {}      # location -> set of bools taken
        self.trip_counts = {}   # location -> set of ints
        self.failures = {}      # location -> failed guards so far
        self.last_failure = {}  # location -> what its latest failed guard said
        self.max_failures = max_failures
        self.relaxed = set()    # locations never speculated again

    def guard_failed(self, location, failure):
        """After `max_failures` failures an assumption is no longer made; before
        that, the location is profiled afresh (from the failing call on)."""
        self.failures[location] = self.failures.get(location, 0) + 1
        self.last_failure[location] = failure
        if self.failures[location] >= self.max_failures:
            self.relaxed.add(location)
        else:
            self.branches.pop(location, None)
            self.trip_counts.pop(location, None)

    def note_branch(self, location, taken):
        self.branches.setdefault(location, set()).add(taken)

    def note_trip_count(self, location, count):
        self.trip_counts.setdefault(location, set()).add(count)

    def branch_taken(self, location):
        """The branch to inline at `location`, or None to build a cond."""
        seen = self.branches.get(location)
        if location in self.relaxed or not seen or len(seen) != 1:
            return None
        return next(iter(seen))

    def trip_count(self, location):
        """The number of iterations to unroll at `location`, or None to build a while_loop."""
        seen = self.trip_counts.get(location)
        if location in self.relaxed or not seen or len(seen) != 1:
            return None
        return next(iter(seen))


def current_profile():
    """The profile recording on this thread, or None."""
    return _local.profile


class profiling:
    """Context manager: record tensor predicates into `profile` while code runs
    imperatively (converted code records at its statements; truth_probes.py
    records for code as written)."""

    def __init__(self, profile):
        self.profile = profile

    def __enter__(self):
        self.outer = _local.profile
        _local.profile = self.profile

    def __exit__(self, *exc):
        _local.profile = self.outer


def record_branch(location, cond):
    profile = _local.profile
    if profile is not None and isinstance(cond, mx.nd.NDArray):
        # bool(): an np array (np mode) has no asscalar; both read their one element.
        profile.note_branch(location, bool(cond))


def record_trip_count(location, count):
    profile = _local.profile
    if profile is not None:
        profile.note_trip_count(location, count)

