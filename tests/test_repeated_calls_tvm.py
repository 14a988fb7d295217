"""A repeated inference call on a TVM plan of one compiled step goes through the plan's
lane (executor.ExecutorLane, segmented.PlanLane): its outputs equal the call as written,
the plan's choice sees every call and still times its samples through the full path,
and a plan serving the whole graph, a speed check with something to time, or a
capture with guards keep the full path."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon

import tvm_helpers
from dynamic_twins import assert_same, calls_on_graphs, twins
from gluon_dyn import measure
from gluon_dyn.hybridize.call.dynamic import runner_of
from gluon_dyn.hybridize.timing import speed_check
from tvm_bridge import runtime, segmented


class Policy(gluon.Block):
    """cartpole.Policy's kind: a loop over layers and two heads, no branch."""

    def __init__(self):
        super().__init__()
        self.layers = gluon.nn.Sequential()
        self.layers.add(gluon.nn.Dense(8, in_units=4, activation="tanh"),
                        gluon.nn.Dense(8, in_units=8, activation="tanh"))
        self.policy = gluon.nn.Dense(2, in_units=8)
        self.value = gluon.nn.Dense(1, in_units=8)

    def forward(self, x):
        h = x
        for layer in self.layers:
            h = layer(h)
        return mx.nd.log_softmax(self.policy(h)), self.value(h)[:, 0]


class Branching(Policy):
    """A branch on the data, which the profile speculates on: its graph has a guard."""

    def forward(self, x):
        h = self.layers(x)
        if h.sum() > -1e3:
            h = h * 2
        return mx.nd.log_softmax(self.policy(h)), self.value(h)[:, 0]


def inputs(seed):
    return mx.nd.array(np.random.RandomState(seed).uniform(-1, 1, (5, 4)))


@pytest.fixture
def lane_runs(monkeypatch):
    """The calls PlanLane ran."""
    runs = []
    original = segmented.PlanLane.run
    monkeypatch.setattr(segmented.PlanLane, "run",
                        lambda self, arrays: runs.append(1) or original(self, arrays))
    return runs


def settled(make=Policy, calls=6, **options):
    imperative, dynamic = twins(make, check_speed=False, backend="tvm",
                                backend_options={"cache_dir": tvm_helpers.COMPILE_CACHE.name},
                                **options)
    for seed in range(calls):
        assert_same(dynamic(inputs(seed)), imperative(inputs(seed)), "call %d" % seed)
    [executor] = runner_of(dynamic).cache.values()
    [plan] = executor.tvm_plans.values()
    assert plan is not None and not plan.uses_whole_graph
    return imperative, dynamic, plan


def test_repeated_calls_on_a_tvm_plan_take_its_lane(lane_runs):
    imperative, dynamic, plan = settled()
    lane_runs.clear()
    plan_runs, graph_calls, choice_calls = plan.calls["plan"], calls_on_graphs(dynamic), \
        plan.choice.calls
    for seed in range(10, 10 + 3 * measure.SAMPLE_EVERY):
        assert_same(dynamic(inputs(seed)), imperative(inputs(seed)), "call %d" % seed)
    calls = 3 * measure.SAMPLE_EVERY
    # Every call ran the plan and counted as a graph call and a call of the plan's
    # choice; the calls its choice timed went the full path (SegmentedGraph.__call__).
    assert plan.calls["plan"] == plan_runs + calls
    assert calls_on_graphs(dynamic) == graph_calls + calls
    assert plan.choice.calls == choice_calls + calls
    assert calls - 3 <= len(lane_runs) < calls


def test_arrays_in_shared_memory_are_converted_in_the_lane(lane_runs):
    """A lane made for arrays in shared memory (a DataLoader's batch) converts them
    as the full path does: TVM takes arrays on the CPU only."""
    def shared(seed):
        return inputs(seed).as_in_context(mx.Context("cpu_shared", 0))

    imperative, dynamic, _ = settled()
    for seed in range(10, 16):
        assert_same(dynamic(shared(seed)), imperative(inputs(seed)), "call %d" % seed)
    assert len(lane_runs) >= 4


EXCHANGES = ("one C call for the whole call", "one C call each way", "MXNet's and TVM's Python")


@pytest.mark.parametrize("exchange", EXCHANGES)
def test_the_lane_gives_the_same_results_through_every_exchange(lane_runs, monkeypatch,
                                                                  exchange):
    """The compiled function's whole call in one C call (runtime.tvm_caller), the arrays
    handed to TVM and back in one C call each (ndarray_exchange.py), or both through
    the Python APIs, as a deployed runtime.py alone does; the path named is the one
    that ran."""
    used = []
    if exchange == EXCHANGES[1]:
        monkeypatch.setattr(runtime, "tvm_caller", None)
        for name in ("ndarray_cpu_view", "ndarrays_of_tvm"):
            function = getattr(runtime, name)
            monkeypatch.setattr(runtime, name, lambda *args, function=function, name=name:
                                used.append(name) or function(*args))
    elif exchange == EXCHANGES[2]:
        for name in ("tvm_caller", "ndarray_cpu_view", "ndarrays_of_tvm"):
            monkeypatch.setattr(runtime, name, None)
        monkeypatch.setattr(mx.nd, "from_dlpack", lambda capsule, original=mx.nd.from_dlpack:
                            used.append("from_dlpack") or original(capsule))
    imperative, dynamic, plan = settled()
    function = plan.steps[0].function
    native_calls = function.native_calls
    lane_runs.clear()
    used.clear()
    for seed in range(10, 14):
        assert_same(dynamic(inputs(seed)), imperative(inputs(seed)), "call %d" % seed)
    assert len(lane_runs) >= 3
    if exchange == EXCHANGES[0]:
        assert function.native_calls - native_calls == 4 and used == []
    else:
        assert function.native_calls == 0
        assert set(used) == ({"ndarray_cpu_view", "ndarrays_of_tvm"} if exchange == EXCHANGES[1]
                             else {"from_dlpack"})


def test_a_call_after_its_weights_changed_prepares_them_again_and_calls_in_one_c_call():
    """A lane's whole call in one C call is made for the weights last prepared: a
    write to one (an optimizer step, set_data) sends the next call through the
    function's own path, which prepares them again and makes that call anew."""
    imperative, dynamic, plan = settled()
    function = plan.steps[0].function
    for change in range(3):
        for block in (imperative, dynamic):
            weight = block.policy.weight
            weight.set_data(weight.data() * 0.5 + change)
        preparations, native_calls = function.preparations, function.native_calls
        for seed in range(10, 14):
            assert_same(dynamic(inputs(seed)), imperative(inputs(seed)),
                        "change %d, call %d" % (change, seed))
        assert function.preparations == preparations + 1
        assert function.native_calls == native_calls + 3


def test_decisions_between_training_steps_see_each_steps_weights():
    """REINFORCE's loop: decisions on the TVM plan, then a training step (recorded,
    on MXNet, and the optimizer's in-place update) and decisions again: each first
    decision after a step prepares the new weights, the others are whole calls in
    one C call, and all equal the twin trained as written."""
    imperative, dynamic, plan = settled()
    function = plan.steps[0].function
    trainers = [gluon.Trainer(block.collect_params(), "adam", {"learning_rate": 0.05})
                for block in (imperative, dynamic)]
    for step in range(5):
        preparations, native_calls = function.preparations, function.native_calls
        for seed in range(4):
            call = 100 * step + seed
            assert_same(dynamic(inputs(call)), imperative(inputs(call)), "call %d" % call)
        assert function.preparations == preparations + (step > 0)
        assert function.native_calls == native_calls + 4 - (step > 0)
        for block, trainer in zip((imperative, dynamic), trainers):
            with mx.autograd.record():
                log_probs, value = block(inputs(1000 + step))
                loss = -log_probs[:, 0] + value * value
            loss.backward()
            trainer.step(5)


def test_a_plan_serving_the_whole_graph_keeps_the_full_path(lane_runs):
    imperative, dynamic, plan = settled()
    plan.uses_whole_graph = True
    lane_runs.clear()
    whole = plan.calls["whole graph"]
    for seed in range(10, 14):
        assert_same(dynamic(inputs(seed)), imperative(inputs(seed)), "call %d" % seed)
    assert lane_runs == [] and plan.calls["whole graph"] == whole + 4


def test_a_graph_with_guards_keeps_the_full_path(lane_runs):
    imperative, dynamic, _ = settled(Branching)
    lane_runs.clear()
    before = calls_on_graphs(dynamic)
    for seed in range(10, 14):
        assert_same(dynamic(inputs(seed)), imperative(inputs(seed)), "call %d" % seed)
    assert lane_runs == [] and calls_on_graphs(dynamic) == before + 4


def test_the_speed_check_lets_a_call_take_a_lane_only_when_it_has_nothing_to_do():
    assert speed_check.SpeedCheck(enabled=False).untimed_graph_call()
    check = speed_check.SpeedCheck(enabled=True)
    assert not check.untimed_graph_call()           # measuring
    samples = {name: [0.001] * measure.MIN_SAMPLES for name in (check.challenger,
                                                                  check.incumbent)}
    samples[check.challenger] = [0.0001] * measure.MIN_SAMPLES
    while check.measuring:
        check.choice.decide(samples)
        check.measuring = check.choice.confirming
    assert check.choice.chosen == check.challenger
    taken = 0
    for _ in range(measure.SAMPLE_EVERY - 1):
        taken += check.untimed_graph_call()
    assert taken == measure.SAMPLE_EVERY - 1 and check.choice.calls == taken
    assert not check.untimed_graph_call()           # this call is to be timed
    assert check.choice.calls == taken
