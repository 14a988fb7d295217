"""A fused trainer's steps on every core (gluon_dyn/training/wide_steps.py, threads.py's
wide regions): a region gives MXNet's engine thread every core until it ends; the
choice is measured from the loop's steps in alternating blocks, and a trainer that
chose one thread, or whose steps run no graph, leaves its blocks alone; a step on
every core trains as `trainer.step` as written (50 Adam steps, 1e-5), its graphs
served and run in the region, which ends at the update."""
import ctypes

import mxnet as mx
import pytest
from mxnet import autograd, gluon

import gluon_dyn
from gluon_dyn import threads, training
from gluon_dyn.training import wide_steps

from test_fused_updates import STEPS, Model, assert_same_training, batches, build, options

pytestmark = pytest.mark.skipif(not threads.all_cores_available(), reason=(
    "one core, MXNet's thread count set, or MXNet's engine runs a context's operators "
    "on several threads"))


@pytest.fixture
def narrow_engine():
    """The engine thread's OpenMP count outside regions; none left open after."""
    before = threads.engine_omp_threads()
    yield before
    threads.end_all_cores()
    assert threads.engine_omp_threads() == before


def test_a_wide_region_gives_the_engine_every_core_until_it_ends(narrow_engine):
    assert narrow_engine < threads.cores()
    threads.begin_all_cores()
    threads.begin_all_cores()        # inside a region: no-op
    assert threads.engine_omp_threads() == threads.cores()
    threads.end_all_cores([mx.nd.ones((2,))])
    assert threads.engine_omp_threads() == narrow_engine
    threads.end_all_cores()          # outside a region: no-op
    assert threads.engine_omp_threads() == narrow_engine


def _threads_now():
    """An engine function pushed now, reading nothing: the engine thread's count when
    it runs (as soon as the thread is free, ahead of operators waiting for inputs)."""
    # pylint: disable=protected-access
    count = ctypes.c_int(0)
    regions = threads._REGIONS
    regions.push(regions.threads, (), ctypes.cast(ctypes.pointer(count), ctypes.c_void_p))
    mx.nd.waitall()
    return count.value


def test_a_region_ends_after_the_operators_making_what_it_reads(narrow_engine):
    # The product is pushed behind a wait for `slow`'s operator, so the end (reading
    # it) comes after it and an engine function reading nothing runs before both.
    threads.begin_all_cores()
    slow = mx.nd.dot(mx.nd.ones((1500, 1500)), mx.nd.ones((1500, 1500)))
    product = mx.nd.dot(slow, mx.nd.ones((1500, 10)))
    threads.end_all_cores([product])
    assert _threads_now() == threads.cores()
    assert threads.engine_omp_threads() == narrow_engine


def test_a_region_begun_while_the_last_one_waits_to_end_begins_after_it(narrow_engine):
    # The next step's begin reads nothing, the previous step's end waits for its
    # gradients: run in the order pushed, the new region is open once both ran.
    threads.begin_all_cores()
    slow = mx.nd.dot(mx.nd.ones((1500, 1500)), mx.nd.ones((1500, 1500)))
    threads.end_all_cores([mx.nd.dot(slow, mx.nd.ones((1500, 10)))])
    threads.begin_all_cores()
    assert threads.engine_omp_threads() == threads.cores()


@pytest.mark.parametrize("environ", [{"MXNET_OMP_MAX_THREADS": "1"}, {"OMP_NUM_THREADS": "2"}])
def test_a_thread_count_the_user_set_is_kept(environ):
    assert not threads.all_cores_available(environ)


class ScriptedLoop:
    """WideSteps driven as FusedUpdater and the executor drive it, with a clock
    giving each step the seconds `seconds(wide)` says and the regions recorded."""

    def __init__(self, monkeypatch, seconds, graphs=True):
        self.now, self.seconds, self.graphs = 0.0, seconds, graphs
        self.regions = []
        monkeypatch.setattr(wide_steps.time, "perf_counter", lambda: self.now)
        monkeypatch.setattr(threads, "begin_all_cores", lambda: self.regions.append("begin"))
        monkeypatch.setattr(threads, "end_all_cores", lambda reads=(): None)
        self.weight = mx.nd.ones((3,))
        self.steps = wide_steps.WideSteps()

    def step(self):
        """One step: its graph (if any), its time, its update; whether it ran wide."""
        before = len(self.regions)
        if self.graphs:
            with autograd.record():      # as the executor calls it for a recorded run
                wide_steps.graph_runs([mx.nd.ones((1,)), self.weight])
        wide = len(self.regions) > before
        self.now += self.seconds(wide)
        self.steps.update_begins([])
        self.steps.update_ends([self.weight])
        return wide


def test_wide_steps_are_chosen_where_the_loop_measured_them_faster(monkeypatch):
    loop = ScriptedLoop(monkeypatch, lambda wide: 0.008 if wide else 0.010)
    measured = 2 * wide_steps.BLOCK * wide_steps.ROUNDS
    ran = [loop.step() for _ in range(wide_steps.WARM_STEPS + measured)]
    # warm steps on one thread, then blocks of one thread and all cores in turn
    block = [False] * wide_steps.BLOCK + [True] * wide_steps.BLOCK
    assert ran == [False] * wide_steps.WARM_STEPS + block * wide_steps.ROUNDS
    report = loop.steps.report()
    assert report["state"] == "all cores"
    assert "8.000 ms on all cores" in report["reason"]
    # each step after a change is not timed; the first narrow one follows narrow steps
    assert report["timed_steps"] == {"one thread": 13, "all cores": 12}
    assert all(loop.step() for _ in range(3))
    # an inference run of a graph reading the weights starts no step
    before = len(loop.regions)
    loop.steps.update_begins([])
    loop.steps.update_ends([loop.weight])
    wide_steps.graph_runs([loop.weight])
    assert len(loop.regions) == before


@pytest.mark.parametrize("wide_seconds", [0.010, 0.0097])
def test_steps_stay_on_one_thread_unless_all_cores_gain_enough(monkeypatch, wide_seconds):
    loop = ScriptedLoop(monkeypatch, lambda wide: wide_seconds if wide else 0.010)
    for _ in range(wide_steps.WARM_STEPS + 2 * wide_steps.BLOCK * wide_steps.ROUNDS):
        loop.step()
    assert loop.steps.report()["state"] == "one thread"
    # its weights are out of the way: their graphs start no step
    assert id(loop.weight) not in wide_steps._by_weight     # pylint: disable=protected-access
    assert not any(loop.step() for _ in range(3))


def test_steps_without_graphs_are_not_timed_and_stay_on_one_thread(monkeypatch):
    loop = ScriptedLoop(monkeypatch, lambda wide: 0.001 if wide else 0.010, graphs=False)
    for _ in range(wide_steps.WARM_STEPS + 2 * wide_steps.BLOCK * wide_steps.ROUNDS):
        loop.step()
    report = loop.steps.report()
    assert report["state"] == "one thread" and "too few" in report["reason"]
    assert report["timed_steps"] == {"one thread": 0, "all cores": 0}


def _train(net, trainer, during_step=None):
    for step, (x, y, rows) in enumerate(batches(Model)):
        with autograd.record():
            loss = ((net(mx.nd.array(x)) - mx.nd.array(y)) ** 2).sum()
        loss.backward()
        if during_step is not None:
            during_step(step)
        trainer.step(rows)


def test_steps_on_every_core_train_as_trainer_step_as_written(narrow_engine):
    """Adam with weight decay, clipping, lr_mult, wd_mult and a schedule, 50 steps:
    the dynamic block's graphs (an LSTM layer, MXNet's oneDNN RNN operator among
    them) run in a wide region from the step's graph to the update."""
    written_net = build(Model)
    written = gluon.Trainer(written_net.collect_params(), "adam", options("adam"))
    _train(written_net, written)

    net = build(Model)
    net.hybridize(dynamic=True, check_speed=False)     # every call on its graph, as --whole-step
    trainer = gluon_dyn.fused_updates(
        gluon.Trainer(net.collect_params(), "adam", options("adam")), all_cores=True)
    seen = []

    def during_step(step):
        if step in (10, 40):
            seen.append(threads.engine_omp_threads())

    _train(net, trainer, during_step)
    assert seen == [threads.cores()] * 2
    assert threads.engine_omp_threads() == narrow_engine        # ended at the update
    assert_same_training((net, trainer), (written_net, written))
    calls = gluon_dyn.hybridize.report(net)["calls"]
    assert calls["graph_share_after_profiling"] == 1.0, calls
    done = training.report(trainer)
    assert done["fused_steps"] == STEPS
    [choice] = done["all_cores"]
    assert choice["state"] == "all cores" and "all_cores=True" in choice["reason"]


def test_a_trainer_switched_back_leaves_no_region_open(narrow_engine):
    net = build(Model)
    net.hybridize(dynamic=True, check_speed=False)     # every call on its graph, as --whole-step
    trainer = gluon_dyn.fused_updates(
        gluon.Trainer(net.collect_params(), "adam", options("adam")), all_cores=True)
    for step, (x, y, rows) in enumerate(batches(Model, steps=6)):
        with autograd.record():
            loss = ((net(mx.nd.array(x)) - mx.nd.array(y)) ** 2).sum()
        loss.backward()
        if step < 5:
            trainer.step(rows)
    # the last recorded graph opened a region no update has ended yet
    assert threads.engine_omp_threads() == threads.cores()
    gluon_dyn.fused_updates(trainer, False)
    assert threads.engine_omp_threads() == narrow_engine
    with autograd.record():
        loss = ((net(mx.nd.array(x)) - mx.nd.array(y)) ** 2).sum()
    loss.backward()
    trainer.step(rows)
    assert threads.engine_omp_threads() == narrow_engine


def test_a_choice_is_measured_afresh_when_asked(monkeypatch):
    """measure_cores: a trainer's choice (here set) is measured again from its next
    step; its weights' graphs start its steps again."""
    net = build(Model)
    net.hybridize(dynamic=True, check_speed=False)     # every call on its graph, as --whole-step
    trainer = gluon_dyn.fused_updates(
        gluon.Trainer(net.collect_params(), "adam", options("adam")), all_cores=False)
    loop = ScriptedLoop(monkeypatch, lambda wide: 0.0)
    loop.steps = trainer._updaters[0]._fusion.wide_steps   # pylint: disable=protected-access
    loop.weight = next(iter(net.collect_params().values())).data()
    loop.step()
    assert training.report(trainer)["all_cores"][0]["state"] == "one thread"
    training.measure_cores(trainer)
    choice = training.report(trainer)["all_cores"][0]
    assert choice["state"] == "measuring" and choice["timed_steps"] == {
        "one thread": 0, "all cores": 0}
    for _ in range(wide_steps.WARM_STEPS + 1):
        loop.step()
    assert training.report(trainer)["all_cores"][0]["timed_steps"]["one thread"] == 1
