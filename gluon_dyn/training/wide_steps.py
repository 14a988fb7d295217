"""A fused trainer's steps with their operators on every core, where measured faster.

MXNet gives each operator half the CPUs by default (one thread on 2 cores), which
suits imperative training: its Python thread pushes the next operators on the
other core. A step of few long operators, whose Python waits for the engine, runs
faster with every core (threads.py: a wide region); most steps run slower so, the
more so as the team's idle threads spin into the Python work that follows. The
choice is measured, per fused updater (one per context of a Trainer), on the time
from one update to the next, as the training loop runs:

    step k: from the trainer's update k-1 (`update_begins`, from FusedUpdater) to
            its update k, its graphs run after its first recorded graph run reading
            the trainer's weights (`graph_runs`, from the executor)
    steps 0 .. WARM_STEPS-1:         one thread, not timed
    then ROUNDS rounds of BLOCK steps on one thread and BLOCK on every core, timed
    but for the first step after a change (the other block's threads spin into it)
    then every step wide if the median wide step took at most GAIN of the median
    narrow one, else as MXNet runs them (and this module is out of their way)

A wide region opens at a step's first graph run and ends at the update, once the
gradients are made; the update's own kernels (MXNet's) are not widened. A step
whose graphs do not run through the executor (a recursion engine's batches) is not
timed, and a trainer with too few timed steps stays on one thread. Work done between
the steps counts, as it does in the loop's speed: steps interleaved with other work
(a benchmark alternating trainings) measure it too, and `measure_cores(trainer)`
starts the measurement afresh (benchmarks/training_report.py, once its interleaved
warm-up is done, runs a trainer's steps alone until it has chosen).
`fused_updates(trainer, all_cores=True/False)` sets the choice instead of measuring it.
"""
import statistics
import time
import weakref

from mxnet import autograd

from .. import threads

WARM_STEPS = 4
BLOCK = 5
ROUNDS = 3
GAIN = 0.95     # a wide step must be 5% faster: below that, timing noise decides

# id(weight NDArray) -> the WideSteps of the updater that updated it last, for those
# still measuring or chosen wide.
_by_weight = weakref.WeakValueDictionary()


def graph_runs(inputs):
    """A graph is about to run on `inputs`: if autograd records it, the step of each
    trainer updating one of them starts, if it had not. Cheapest where no trainer
    measures or chose every core (every graph run calls it)."""
    if not _by_weight or not autograd.is_recording():
        return
    started = set()
    for array in inputs:
        steps = _by_weight.get(id(array))
        if steps is not None and id(steps) not in started:
            started.add(id(steps))
            steps.step_starts()


class WideSteps:
    """The choice for one updater's steps: state "measuring", "all cores", "one
    thread" (chosen or set) or "unavailable" (threads.all_cores_available)."""

    def __init__(self, forced=None):
        self.steps = 0
        self.times = {False: [], True: []}     # seconds per timed step, by wideness
        self.reason = None
        self._graph_ran = False         # in the current step
        self._wide_now = False          # the current step's wideness
        self._previous_update = None    # (when, the wideness of the step it ended)
        self._registered = set()        # ids of weights in _by_weight
        self.state = "measuring"
        self.force(forced)

    def force(self, wide):
        """All cores (True), one thread (False), or measured (None) from now on."""
        if not threads.all_cores_available():
            self.state, self.reason = "unavailable", (
                "MXNet's thread count is set (MXNET_OMP_MAX_THREADS, OMP_NUM_THREADS), "
                "there is one core, or MXNet runs the CPU's operators on several threads")
        elif wide is not None:
            self.state = "all cores" if wide else "one thread"
            self.reason = "set by fused_updates(all_cores=%s)" % wide
        else:
            self.state, self.reason, self.steps = "measuring", None, 0
            self.times = {False: [], True: []}
            self._previous_update, self._wide_now = None, False

    def step_starts(self):
        if not self._graph_ran:
            self._graph_ran = True
            if self._wide_now:
                threads.begin_all_cores()

    def update_begins(self, grads):
        """The update of the step whose gradients are `grads` is about to be pushed."""
        threads.end_all_cores(grads)
        if self.state == "measuring":
            now = time.perf_counter()
            previous = self._previous_update
            if self.steps >= WARM_STEPS and self._graph_ran and previous is not None and \
                    previous[1] == self._wide_now:
                self.times[self._wide_now].append(now - previous[0])
            self._previous_update = (now, self._wide_now)
        self._graph_ran = False

    def update_ends(self, weights):
        """The update of `weights` is pushed: the next step's wideness."""
        if self.state == "measuring":
            self.steps += 1
            timed = self.steps - WARM_STEPS
            if timed >= 2 * BLOCK * ROUNDS:
                self._choose()
            else:
                self._wide_now = timed >= 0 and (timed // BLOCK) % 2 == 1
        if self.state != "measuring":
            self._wide_now = self.state == "all cores"
        self._register({id(weight) for weight in weights}
                       if self.state in ("measuring", "all cores") else set())

    def _register(self, ids):
        """The weights whose graphs start this updater's steps are those of `ids` (the
        weights of its latest update: a parameter's replaced array leaves)."""
        for stale in self._registered - ids:
            if _by_weight.get(stale) is self:
                del _by_weight[stale]
        for key in ids:
            _by_weight[key] = self
        self._registered = ids

    def _choose(self):
        narrow, wide = self.times[False], self.times[True]
        if len(narrow) < BLOCK or len(wide) < BLOCK:     # of (BLOCK - 1) * ROUNDS each
            self.state, self.reason = "one thread", (
                "too few of its steps ran a recorded graph reading its weights to time them")
            return
        narrow_s, wide_s = statistics.median(narrow), statistics.median(wide)
        self.state = "all cores" if wide_s <= GAIN * narrow_s else "one thread"
        self.reason = "measured: a step took %.3f ms on one thread, %.3f ms on all cores" % (
            narrow_s * 1e3, wide_s * 1e3)

    def withdraw(self):
        """The updater stops updating (fused_updates(trainer, False)): no region opens
        for its weights, and an open one ends."""
        self._register(set())
        self._graph_ran = False
        threads.end_all_cores()

    def report(self):
        return {"state": self.state, "reason": self.reason,
                "timed_steps": {"one thread": len(self.times[False]),
                                "all cores": len(self.times[True])}}
