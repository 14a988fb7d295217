"""How many CPUs other processes keep busy, read from the kernel's counters.

A choice measured while another process held a core may be wrong once it is gone
(and the other way round): TVM's and MXNet's parallel loops stall on a shared core
far more than one thread does. The variant not chosen is never observed while the
chosen one serves, so the load itself is watched: `other_cpus()` is the machine's
busy CPU time (/proc/stat) less this process's own (all its threads), per second
of wall time, over the last READING_SECONDS or more. None where the kernel gives
no such counters (not Linux).
"""
import os
import time

# Readings closer together than this are too coarse (the kernel counts in 10 ms
# ticks): the last estimate is returned instead.
READING_SECONDS = 0.25
_TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _busy_seconds():
    """CPU seconds every CPU spent busy since boot, or None."""
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    ticks = [int(value) for value in fields[1:]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)   # idle + iowait
    # guest time is counted in user time already
    return (sum(ticks[:8]) - idle) / _TICKS_PER_SECOND


class _Sampler:
    def __init__(self):
        self.last = self._reading()
        self.estimate = None

    @staticmethod
    def _reading():
        busy = _busy_seconds()
        return None if busy is None else (time.monotonic(), busy, time.process_time())

    def other_cpus(self):
        if self.last is None:
            return None
        now = time.monotonic()
        if now - self.last[0] >= READING_SECONDS:
            reading = self._reading()
            wall, busy, own = (new - old for new, old in zip(reading, self.last))
            self.estimate = max(0.0, (busy - own) / wall)
            self.last = reading
        return self.estimate


_sampler = _Sampler()


def other_cpus():
    """CPUs kept busy by other processes lately (e.g. 1.0: one core's worth), or
    None when unknown."""
    return _sampler.other_cpus()
