"""Timing code on a noisy machine: every measurement that chooses between
implementations (a graph or the forward as written, a TVM segment or MXNet)
goes through here, and every such choice follows MeasuredChoice's policy."""
import statistics
import time

import mxnet as mx

from . import machine_load

# A variant's time in a measurement: this quantile of its timed calls. Load from
# other processes only ever adds time, so a low quantile follows what a variant
# costs on its own: with a busy process on the other core, medians of the same
# plan measured 0.14 and 1.6 ms in one run (benchmarks/noisy_neighbour.py), and
# one preempted call in four changes nothing.
QUANTILE = 0.25
# A challenger must be this much faster (a fraction of the incumbent's time)...
MARGIN = 0.05
# ...in this many consecutive measurements, before it replaces the incumbent.
CONFIRMATIONS = 2
# Where no variant is faster by MARGIN, one as fast (within MARGIN) that returns to
# the caller this much sooner (a fraction of the incumbent's time until it returned)
# wins instead, where the caller's times were measured: the caller runs on while
# MXNet works, so a program that runs ahead of its operators gains the difference,
# and one that reads each result at once loses nothing. A GAN's discriminator as a
# graph and as written took as long to complete (1.46 ms each, with its backward's
# share), the graph returned after 0.09 ms against 0.42, and the training step took
# 4.8 ms with the graph against 5.2 as written.
CALLER_MARGIN = 0.25
# Fewest timed calls per variant a decision accepts. A dynamic block's speed check
# measures from its first graph call on (after 3 profiling calls and a trace) with
# calls that alternate between the graph and the forward as written, and a choice
# is confirmed by a second measurement: 4 + 2 * 2 * MIN_SAMPLES calls until the
# choice serves every call, 20 (issue 26). QUANTILE of 4 calls is the fastest: load
# from other processes only adds time, so three preempted calls in four change nothing.
MIN_SAMPLES = 4
# A serving call in SAMPLE_EVERY is timed; the time (QUANTILE) of the last
# RECENT_SAMPLES timed calls more than SUSPECT_RATIO times the best alternative's
# last time makes the choice suspect, and so does SUSPECT_RATIO times less than
# the chosen variant's own (the load it was measured under went away, and the
# alternatives may have gained more): the variants are measured again.
SAMPLE_EVERY = 16
RECENT_SAMPLES = 5
SUSPECT_RATIO = 1.5
# Each RECENT_SAMPLES timed calls after a measurement double the calls between two
# timed ones, up to MAX_SAMPLE_EVERY: a timed call waits for all the work MXNet has
# queued, which in a step bound by operators stops Python from running ahead of
# them (a GAN's generator and discriminator, the forward as written chosen for both,
# sampled one call in 16: the step 10-20% slower than MXNet as written).
MAX_SAMPLE_EVERY = 256
# Measured again anyway at these call counts (the machine's load changes: a
# choice made while another process held a core may be wrong once it is gone).
FIRST_RECHECK, RECHECK_GROWTH = 100, 10
# Measured again when other processes keep this many CPUs more or fewer busy than
# during the last measurement (machine_load.py), once LOAD_RECHECK_CALLS calls
# were served since it: the variant not chosen may have gained or lost most, and
# it is never observed while the chosen one serves.
LOAD_CHANGE = 0.5
LOAD_RECHECK_CALLS = 4 * SAMPLE_EVERY


def typical_seconds(samples):
    """A variant's time from its timed calls (seconds): the QUANTILE of them."""
    ordered = sorted(samples)
    return ordered[int(QUANTILE * (len(ordered) - 1))]


def _wait_for_all(_outputs):
    mx.nd.waitall()


def timed_call(run, wait=_wait_for_all):
    """(run(), milliseconds until `wait(run())` returns: by default, until MXNet has
    finished all the work it started, milliseconds until run() returned: the calling
    thread's share). MXNet's queue is emptied first: a program that runs ahead of its
    operators leaves work queued before the call, and timed with it, the call of a
    GAN's discriminator, 0.3 ms alone, took 1.6 ms (either variant), and a serving
    call sampled after 50 queued ones looked 13x slower than measured (a re-check for
    nothing). backward_timing.py waits the same way."""
    mx.nd.waitall()
    start = time.perf_counter()
    result = run()
    returned = time.perf_counter()
    wait(result)
    return result, (time.perf_counter() - start) * 1000, (returned - start) * 1000


def timed_ms(run, wait=_wait_for_all):
    """(run(), milliseconds until `wait(run())` returns), as timed_call times it."""
    result, ms, _ = timed_call(run, wait)
    return result, ms


def interleaved_samples(variants, warmup=3, repeats=20):
    """Seconds per call of each zero-argument callable in `variants` (a dict name
    -> fn), `repeats` samples each, calling them in turn (A, B, A, B, ...) so that
    drifts in machine load hit every variant alike: a dict name -> list."""
    if not variants:
        raise ValueError("no variants to time")
    if warmup < 0 or repeats < 1:
        raise ValueError(f"need warmup >= 0 and repeats >= 1, got {warmup} and {repeats}")
    for _ in range(warmup):
        for run in variants.values():
            run()
    samples = {name: [] for name in variants}
    for _ in range(repeats):
        for name, run in variants.items():
            start = time.perf_counter()
            run()
            samples[name].append(time.perf_counter() - start)
    return samples


def median_time(variants, warmup=3, repeats=20):
    """Median seconds per call of each zero-argument callable in `variants`
    (a dict name -> fn, or a list), timed by interleaved_samples. Returns the
    same keys/order."""
    named = variants if isinstance(variants, dict) else dict(enumerate(variants))
    medians = {name: statistics.median(times)
               for name, times in interleaved_samples(named, warmup, repeats).items()}
    return medians if isinstance(variants, dict) else [medians[name] for name in named]


def decide_by_timing(choice, variants, why, repeats, sample=interleaved_samples):
    """Time `variants` (name -> zero-argument fn) with `sample` (interleaved_samples'
    signature) and let `choice` (a MeasuredChoice) decide, measuring again while it
    waits to confirm a faster variant; returns the last times (name -> ms)."""
    choice.decide(sample(variants, repeats=repeats), why)
    while choice.confirming:
        choice.decide(sample(variants, repeats=repeats), why + ", confirming")
    return dict(choice.history[-1]["times_ms"])


class MeasuredChoice:
    """Which of several variants serves calls, chosen by timing and kept against noise.

    - `decide(samples)` takes interleaved timings (name -> seconds per call, at
      least MIN_SAMPLES each) and compares their times (`typical_seconds`). The
      incumbent (at first `incumbent`, the safe default) is replaced only by a
      variant faster by more than MARGIN, or as fast and returning to the caller
      sooner by CALLER_MARGIN (when `caller_samples` are given), in CONFIRMATIONS
      consecutive measurements: one noisy sample or round never flips a choice.
      While a challenger waits for confirmation, `confirming` is True and the
      caller measures again.
    - Serving calls report to `served(seconds)`: one call in SAMPLE_EVERY is timed
      (`wants_timing()`), then one in twice as many after each RECENT_SAMPLES timed
      calls, up to MAX_SAMPLE_EVERY, until the next measurement. `recheck_due()` says
      when to measure again: the
      recent timed calls are SUSPECT_RATIO times slower than the best alternative
      was, a challenger waits for confirmation, the machine's load changed
      since the last measurement (LOAD_CHANGE), or a scheduled re-check
      (FIRST_RECHECK calls, then RECHECK_GROWTH times as many) is reached.
    - `history` says what was compared and when: per measurement the call count,
      the wall-clock time, the times (ms), the choice and why.

    `clock` (wall-clock seconds) is injectable for tests.
    """

    def __init__(self, names, incumbent, clock=time.time):
        self.names = tuple(names)
        if incumbent not in self.names or len(self.names) < 2:
            raise ValueError(f"need two or more variants including the incumbent "
                             f"{incumbent!r}, got {self.names}")
        self.chosen, self._clock = incumbent, clock
        self.history = []
        self.calls = 0
        self._wins = {}              # challenger -> consecutive measurements it won
        self._times = None           # name -> seconds, from the last measurement
        self._recent = []            # seconds of the last timed serving calls
        self._next_recheck = FIRST_RECHECK
        # Doubled each time a suspicion was measured and not borne out, so that
        # a difference between serving and measuring costs few re-checks.
        self._suspect_ratio = SUSPECT_RATIO
        self._suspected = False
        self._load = None            # other processes' busy CPUs at the last measurement
        self._measured_at = 0        # self.calls then
        self._sampling_from(0)

    @property
    def confirming(self):
        """A challenger won the last measurement and waits for another."""
        return any(self._wins.values())

    def decide(self, samples, why="measured", caller_samples=None):
        """Update the choice from `samples` (name -> seconds per call until its work
        was done) and `caller_samples` (name -> seconds until each call returned, or
        None: not measured); returns it."""
        times, callers = self._typical(samples), None
        if caller_samples is not None:
            callers = self._typical(caller_samples)
        winner, lead = self._winner(times, callers)
        before = self.chosen
        if winner is not None:
            self._wins = {winner: self._wins.get(winner, 0) + 1}
            if self._wins[winner] >= CONFIRMATIONS:
                self.chosen, self._wins = winner, {}
        else:
            self._wins = {}
        if self._suspected and self.chosen == before and not self.confirming:
            self._suspect_ratio *= 2
        self._suspected = False
        if self.chosen != before:
            outcome = f"{self.chosen} replaces {before}"
        elif self.confirming:
            outcome = f"{winner} {lead} once, {self.chosen} kept until it is confirmed"
        else:
            outcome = f"{self.chosen} kept"
        self._times, self._recent = times, []
        self._load, self._measured_at = machine_load.other_cpus(), self.calls
        self._sampling_from(self.calls)
        entry = {"call": self.calls, "time": self._clock(),
                 "times_ms": {name: ms * 1000 for name, ms in times.items()},
                 "samples": {name: len(samples[name]) for name in self.names},
                 "chosen": self.chosen, "why": f"{why}: {outcome}"}
        if callers is not None:
            entry["returned_ms"] = {name: ms * 1000 for name, ms in callers.items()}
        self.history.append(entry)
        return self.chosen

    def _typical(self, samples):
        """name -> typical_seconds of its samples; at least MIN_SAMPLES each."""
        short = {name: len(samples.get(name, ())) for name in self.names
                 if len(samples.get(name, ())) < MIN_SAMPLES}
        if short:
            raise ValueError(f"a decision needs {MIN_SAMPLES} timed calls of each variant, "
                             f"got {short}")
        return {name: typical_seconds(samples[name]) for name in self.names}

    def _winner(self, times, callers):
        """(the variant that beats the chosen one in this measurement, how), or
        (None, None): faster by MARGIN, else as fast and returning sooner by
        CALLER_MARGIN."""
        best = min(times, key=times.get)
        if best != self.chosen and times[best] * (1 + MARGIN) < times[self.chosen]:
            return best, "faster"
        if callers is not None:
            soonest = min(callers, key=callers.get)
            if soonest != self.chosen and times[soonest] <= times[self.chosen] * (1 + MARGIN) \
                    and callers[soonest] < callers[self.chosen] * (1 - CALLER_MARGIN):
                return soonest, "as fast and returning sooner"
        return None, None

    def _sampling_from(self, calls):
        """Serving calls are timed one in SAMPLE_EVERY from `calls` on."""
        self._sample_every, self._timed_at_this_rate = SAMPLE_EVERY, 0
        self._next_timed = calls + SAMPLE_EVERY

    def timing_due(self):
        """Whether the next serving call is to be timed (wants_timing's answer), asked
        without scheduling anything."""
        return self.calls + 1 >= self._next_timed

    def wants_timing(self):
        """Whether the next serving call should be timed (to completion). Asked once
        per serving call: a yes schedules the next timed call (a recorded call's
        time is served only once its backward has run, calls later)."""
        if not self.timing_due():
            return False
        self._timed_at_this_rate += 1
        if self._timed_at_this_rate == RECENT_SAMPLES and self._sample_every < MAX_SAMPLE_EVERY:
            self._sample_every, self._timed_at_this_rate = self._sample_every * 2, 0
        self._next_timed = self.calls + 1 + self._sample_every
        return True

    def served(self, seconds=None):
        """A serving call of the chosen variant happened; `seconds` if it was timed."""
        self.calls += 1
        if seconds is not None:
            self._recent = (self._recent + [seconds])[-RECENT_SAMPLES:]

    def serve(self, run, wait, measure_again):
        """`run()` as a serving call of the chosen variant; timed (timed_ms, until
        `wait(outputs)` returns) when wants_timing says, then `measure_again(why)`
        when a re-check is due. Returns run()'s outputs."""
        if not self.wants_timing():
            self.served()
            return run()
        outputs, ms = timed_ms(run, wait)
        self.served(ms / 1000)
        why = self.recheck_due()
        if why:
            measure_again(why)
        return outputs

    def recheck_due(self):
        """Why the variants should be measured again now, or None."""
        if self.confirming:
            return "confirming a faster variant"
        if self.calls >= self._next_recheck:
            self._next_recheck *= RECHECK_GROWTH
            return "scheduled re-check after %d calls" % self.calls
        load = machine_load.other_cpus()
        if (load is not None and self._load is not None and abs(load - self._load) >= LOAD_CHANGE
                and self.calls - self._measured_at >= LOAD_RECHECK_CALLS):
            # What serving and measuring differed by was learnt under the old load.
            self._suspect_ratio = SUSPECT_RATIO
            return ("other processes kept %.1f CPUs busy when it was measured, %.1f now: "
                    "the load changed" % (self._load, load))
        if self._times is not None and len(self._recent) == RECENT_SAMPLES:
            observed = typical_seconds(self._recent)
            alternative = min(ms for name, ms in self._times.items() if name != self.chosen)
            if observed > self._suspect_ratio * alternative:
                self._suspected = True
                return ("%s ran %.3f ms per call, %.1fx the %.3f ms another variant took"
                        % (self.chosen, observed * 1000, observed / alternative,
                           alternative * 1000))
            measured = self._times[self.chosen]
            if observed * self._suspect_ratio < measured:
                self._suspected = True
                return ("%s ran %.3f ms per call, %.1fx faster than the %.3f ms it measured: "
                        "the load changed" % (self.chosen, observed * 1000, measured / observed,
                                              measured * 1000))
        return None

    def report(self):
        return {"chosen": self.chosen, "calls": self.calls, "history": list(self.history)}
