"""gluon_dyn.fused_updates(trainer): 50-step trajectories equal `trainer.step` as
written (parameters and optimizer states: Adam within 1e-5, SGD, AdaGrad and RMSProp
bitwise) with rescale_grad, clip_gradient, weight decay, lr_mult and wd_mult, an
lr_scheduler, grad_req='add', stale gradients (skipped or raising), float16 with and
without multi_precision, two contexts, blocks hybridized with dynamic=True,
save_states/load_states and switching off mid-training; the report proves the fused
operators ran; an unsupported optimizer says why and runs MXNet's loop; Horovod (2
workers) equals one process."""
import os
import sys
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_dyn
from gluon_dyn import training

import fused_updates_worker as worker
from train_helpers import local_workers

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 50


class Model(gluon.Block):
    """Dense -> LSTM -> Dense, and a Dense (`branch`) only some steps use (`skip`):
    its gradient is then stale. Its parameters sort first, so after a skip the
    optimizer counts them first, while num_update is still the previous step's
    (the learning rate they get shows it). One weight is large (76800 elements):
    SGD and Adam update it with a single-tensor kernel, the others in multi-tensor
    calls."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.embed = gluon.nn.Dense(256, in_units=300, flatten=False, activation="tanh",
                                        prefix="embed_")
            self.lstm = gluon.rnn.LSTM(8, input_size=256, layout="NTC", prefix="lstm_")
            self.branch = gluon.nn.Dense(8, in_units=8, flatten=False, prefix="branch_")
            self.output = gluon.nn.Dense(3, in_units=40, prefix="output_")

    def forward(self, x, skip=False):
        h = self.lstm(self.embed(x))
        if not skip:
            h = self.branch(h)
        return self.output(h)


class SmallModel(gluon.Block):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.hidden = gluon.nn.Dense(16, in_units=12, activation="relu", prefix="hidden_")
            self.output = gluon.nn.Dense(3, in_units=16, prefix="output_")

    def forward(self, x, skip=False):
        return self.output(self.hidden(x))


class HalfModel(gluon.Block):
    """float16 parameters in a float32 computation (MXNet's CPU FullyConnected has no
    float16): their gradients are float16, as in mixed-precision training."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        shapes = {"hidden_weight": (16, 12), "hidden_bias": (16,),
                  "output_weight": (3, 16), "output_bias": (3,)}
        with self.name_scope():
            self.weights = {name: self.params.get(name, shape=shape, dtype="float16",
                                                  init=mx.init.Uniform(0.5))
                            for name, shape in shapes.items()}

    def forward(self, x, skip=False):
        w = {name: p.data().astype("float32") for name, p in self.weights.items()}
        h = mx.nd.relu(mx.nd.FullyConnected(x, w["hidden_weight"], w["hidden_bias"],
                                            num_hidden=16))
        return mx.nd.FullyConnected(h, w["output_weight"], w["output_bias"], num_hidden=3)


def batches(model, steps=STEPS):
    """Fixed batches; the batch size varies (rescale_grad = 1/batch_size changes)."""
    rng = np.random.RandomState(7)
    shape = (5, 300) if model is Model else (12,)   # SmallModel, HalfModel
    for step in range(steps):
        rows = 3 + step % 3
        yield (rng.uniform(-1, 1, (rows,) + shape), rng.uniform(-1, 1, (rows, 3)), rows)


def build(model=Model, grad_req="write"):
    mx.random.seed(11)
    net = model(prefix="net_")
    net.initialize(mx.init.Xavier())
    net.collect_params().setattr("grad_req", grad_req)
    # per-parameter multipliers the optimizers must apply
    biases, outputs = net.collect_params(".*bias"), net.collect_params(".*output.*")
    assert list(biases.keys()) and list(outputs.keys())
    biases.setattr("wd_mult", 0.0)
    outputs.setattr("lr_mult", 0.5)
    return net


def options(name, **extra):
    """Weight decay, clipping and a learning rate that changes at every update."""
    lr = 0.05 if name == "sgd" else 0.01
    base = {"learning_rate": lr, "wd": 0.01, "clip_gradient": 0.5,
            "lr_scheduler": mx.lr_scheduler.PolyScheduler(max_update=80, base_lr=lr, pwr=2)}
    base.update(extra)
    return base


def train(net, trainer, data, skip_every=0, ignore_stale_grad=False, accumulate=1):
    """Steps over `data`; with `skip_every`, every so many steps skip net.branch;
    with `accumulate`, gradients add up over that many batches (grad_req='add')
    before a step. Returns the message of a step that raised, if one did."""
    for step, (x, y, rows) in enumerate(data):
        skip = bool(skip_every) and step % skip_every == 1
        with autograd.record():
            loss = ((net(mx.nd.array(x), skip) - mx.nd.array(y)) ** 2).sum()
        loss.backward()
        if (step + 1) % accumulate:
            continue
        try:
            trainer.step(rows * accumulate, ignore_stale_grad=ignore_stale_grad)
        except UserWarning as error:    # Gluon's stale-gradient error
            return str(error)
        if accumulate > 1:
            net.collect_params().zero_grad()
    return None


def run(optimizer, opts, fused, model=Model, grad_req="write", **kwargs):
    net = build(model, grad_req)
    trainer = gluon.Trainer(net.collect_params(), optimizer, opts)
    if fused:
        gluon_dyn.fused_updates(trainer)
    error = train(net, trainer, batches(model), **kwargs)
    return net, trainer, error


def parameters(net):
    return {name: p.data().asnumpy() for name, p in net.collect_params().items()}


def states(trainer):
    """Every optimizer state array, flattened per parameter index."""
    def flat(state):
        if isinstance(state, mx.nd.NDArray):
            return [state.asnumpy()]
        if isinstance(state, (tuple, list)):
            return [a for s in state for a in flat(s)]
        return []
    return {index: flat(state) for index, state in trainer._updaters[0].states.items()}


def assert_same_training(fused, written, tolerance=1e-5, weight_atol=1e-5):
    (net_a, trainer_a), (net_b, trainer_b) = fused, written
    params_a, params_b = parameters(net_a), parameters(net_b)
    assert sorted(params_a) == sorted(params_b)
    for name in params_b:
        np.testing.assert_allclose(params_a[name].astype(np.float64), params_b[name],
                                   rtol=tolerance, atol=weight_atol, err_msg=name)
    states_a, states_b = states(trainer_a), states(trainer_b)
    assert sorted(states_a) == sorted(states_b)
    for index in states_b:
        assert len(states_a[index]) == len(states_b[index])
        for a, b in zip(states_a[index], states_b[index]):
            np.testing.assert_allclose(a, b, rtol=tolerance, atol=tolerance,
                                       err_msg="state %s" % index)
    assert trainer_a.optimizer.num_update == trainer_b.optimizer.num_update
    assert trainer_a.optimizer._index_update_count == trainer_b.optimizer._index_update_count
    assert trainer_a.learning_rate == trainer_b.learning_rate


OPTIMIZERS = {
    # name: (optimizer, extra options, the fused operator that must have run)
    "sgd": ("sgd", {}, "multi_sgd_update"),
    "sgd_momentum": ("sgd", {"momentum": 0.9}, "multi_sgd_mom_update"),
    "adam": ("adam", {}, "_multi_adamw_update"),
    "adam_no_decay": ("adam", {"wd": 0.0, "clip_gradient": None}, "_multi_adamw_update"),
    "adagrad": ("adagrad", {}, "adagrad CachedOp"),
    "rmsprop": ("rmsprop", {}, "rmsprop_update"),
    "rmsprop_centered": ("rmsprop", {"centered": True, "clip_weights": 2.0},
                         "rmspropalex_update"),
}


@pytest.mark.parametrize("case", sorted(OPTIMIZERS))
def test_fifty_steps_equal_trainer_step(case):
    """With weight decay, wd_mult 0 on biases, lr_mult 0.5 on the output layer,
    clip_gradient, a PolyScheduler and batch sizes that change, 50 fused steps
    equal 50 steps of trainer.step as written (Adam within 1e-5, the others
    bitwise); every step ran fused."""
    optimizer, extra, operator = OPTIMIZERS[case]
    opts = options(optimizer, **extra)
    fused = run(optimizer, opts, True)
    written = run(optimizer, options(optimizer, **extra), False)
    assert fused[2] is None and written[2] is None
    if optimizer == "adam":     # _multi_adamw_update rounds its moments another way
        assert_same_training(fused[:2], written[:2])
    else:                       # the same kernels, or the same operations: bitwise
        assert_same_training(fused[:2], written[:2], tolerance=0, weight_atol=0)
    done = training.report(fused[1])
    assert done["enabled"] and done["fused_steps"] == STEPS and done["loop_steps"] == {}
    assert done["op_calls"][operator] >= STEPS
    assert training.report(written[1])["fused_steps"] == 0


def test_adam_updates_a_large_tensor_alone_and_the_rest_in_one_call():
    """Adam on Model: the tensor of more than 16384 elements (76800) by adam_update,
    the other nine in one _multi_adamw_update after one multi_sgd_update adding the
    L2 decay to their gradients: 3 calls a step instead of MXNet's 10."""
    _, trainer, _ = run("adam", options("adam"), True)
    assert training.report(trainer)["op_calls"] == {
        "adam_update": STEPS, "_multi_adamw_update": STEPS, "multi_sgd_update": STEPS}


@pytest.mark.parametrize("optimizer", ["sgd", "adam", "adagrad", "rmsprop"])
def test_stale_gradients_skipped_with_ignore_stale_grad(optimizer):
    """net.branch is skipped every third step: its stale gradient is not applied,
    its update count lags, and the step after a skip counts it first."""
    extra = {"momentum": 0.9} if optimizer == "sgd" else {}
    fused = run(optimizer, options(optimizer, **extra), True, skip_every=3,
                ignore_stale_grad=True)
    written = run(optimizer, options(optimizer, **extra), False, skip_every=3,
                  ignore_stale_grad=True)
    assert_same_training(fused[:2], written[:2])
    counts = fused[1].optimizer._index_update_count
    assert min(counts.values()) < max(counts.values())   # the skips happened
    assert training.report(fused[1])["fused_steps"] == STEPS


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_stale_gradients_raise_mxnets_error(optimizer):
    """Without ignore_stale_grad the fused trainer raises Gluon's UserWarning at the
    same step, with the same message, leaving the same parameters."""
    fused = run(optimizer, options(optimizer), True, skip_every=3)
    written = run(optimizer, options(optimizer), False, skip_every=3)
    assert written[2] is not None and "has not been updated by backward" in written[2]
    assert fused[2] == written[2]
    assert_same_training(fused[:2], written[:2])


@pytest.mark.parametrize("optimizer", ["sgd", "adam", "adagrad", "rmsprop"])
def test_gradients_added_over_batches(optimizer):
    """grad_req='add', a step every second batch, zero_grad after it."""
    extra = {"momentum": 0.9} if optimizer == "sgd" else {}
    fused = run(optimizer, options(optimizer, **extra), True, grad_req="add", accumulate=2)
    written = run(optimizer, options(optimizer, **extra), False, grad_req="add", accumulate=2)
    assert_same_training(fused[:2], written[:2])
    assert training.report(fused[1])["fused_steps"] == STEPS // 2


MULTI_PRECISION = {
    "sgd": ("sgd", {}, "multi_mp_sgd_update"),
    "sgd_momentum": ("sgd", {"momentum": 0.9}, "multi_mp_sgd_mom_update"),
    "adam": ("adam", {}, "adam_update"),
    "adagrad": ("adagrad", {}, "adagrad CachedOp"),
    "rmsprop": ("rmsprop", {}, "rmsprop_update"),
}


@pytest.mark.parametrize("case", sorted(MULTI_PRECISION))
def test_float16_with_multi_precision(case):
    """float16 parameters, multi_precision=True: the float32 copies and the other
    states equal within 1e-5; the float16 weights (casts of the copies) within one
    float16 rounding step."""
    optimizer, extra, operator = MULTI_PRECISION[case]
    extra = dict(extra, multi_precision=True)
    fused = run(optimizer, options(optimizer, **extra), True, model=HalfModel)
    written = run(optimizer, options(optimizer, **extra), False, model=HalfModel)
    assert all(p.data().dtype == np.float16 and p.grad().dtype == np.float16
               for p in fused[0].collect_params().values())
    assert_same_training(fused[:2], written[:2], weight_atol=1e-3)
    done = training.report(fused[1])
    assert done["fused_steps"] == STEPS and done["op_calls"][operator] >= STEPS


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_float16_without_multi_precision(optimizer):
    """float16 weights and states: SGD's multi-tensor kernels in float16, Adam's
    adam_update per tensor (its multi-tensor kernel would compute in float16 in
    another order): bitwise MXNet's."""
    extra = {"momentum": 0.9} if optimizer == "sgd" else {}
    fused = run(optimizer, options(optimizer, **extra), True, model=HalfModel)
    written = run(optimizer, options(optimizer, **extra), False, model=HalfModel)
    assert all(s.dtype == np.float16 for state in states(fused[1]).values() for s in state)
    assert_same_training(fused[:2], written[:2], tolerance=0, weight_atol=0)
    assert training.report(fused[1])["fused_steps"] == STEPS


class BranchModel(gluon.Block):
    """An `if` on a tensor: under hybridize(dynamic=True) a graph holds both branches,
    and gluon_dyn marks the untaken branch's parameters stale after each backward."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.pos = gluon.nn.Dense(3, in_units=12, prefix="pos_")
            self.neg = gluon.nn.Dense(3, in_units=12, prefix="output_")   # lr_mult 0.5

    def forward(self, x, skip=False):
        if mx.nd.sum(x) > 0:
            return self.pos(x)
        return self.neg(x)


def test_graphs_of_dynamic_blocks_and_their_stale_branches():
    """A block hybridized with dynamic=True, whose untaken branch leaves stale
    gradients, trained with fused Adam (ignore_stale_grad=True), equals the block
    run imperatively and stepped as written; graphs served its calls."""
    def branch_run(fused, dynamic):
        net = build(BranchModel)
        if dynamic:
            net.hybridize(dynamic=True, check_speed=False)
        trainer = gluon.Trainer(net.collect_params(), "adam", options("adam"))
        if fused:
            gluon_dyn.fused_updates(trainer)
        train(net, trainer, batches(SmallModel), ignore_stale_grad=True)
        return net, trainer

    fused, written = branch_run(True, True), branch_run(False, False)
    assert_same_training(fused, written)
    counts = fused[1].optimizer._index_update_count.values()
    assert max(counts) < STEPS   # each branch was skipped at some steps
    assert gluon_dyn.hybridize.report(fused[0])["calls"]["graph"] > STEPS // 2
    assert training.report(fused[1])["fused_steps"] == STEPS


def test_save_load_states_and_switching_off_continue_identically(tmp_path):
    """25 fused steps, save_states; then (a) the same trainer with fusion switched
    off and (b) a new trainer loading the states, fused, each run the last 25
    steps: both equal 50 steps of trainer.step as written."""
    data = list(batches(Model))
    written_net = build()
    written = gluon.Trainer(written_net.collect_params(), "adam", options("adam"))
    train(written_net, written, data)

    net = build()
    trainer = gluon_dyn.fused_updates(
        gluon.Trainer(net.collect_params(), "adam", options("adam")))
    train(net, trainer, data[:25])
    trainer.save_states(str(tmp_path / "adam.states"))
    saved = {name: p.data().copy() for name, p in net.collect_params().items()}

    gluon_dyn.fused_updates(trainer, False)
    train(net, trainer, data[25:])
    assert_same_training((net, trainer), (written_net, written))
    assert not training.report(trainer)["enabled"]
    assert training.report(trainer)["fused_steps"] == 25

    loaded_net = build()
    for name, p in loaded_net.collect_params().items():
        p.set_data(saved[name])
    loaded = gluon_dyn.fused_updates(
        gluon.Trainer(loaded_net.collect_params(), "adam", options("adam")))
    loaded.load_states(str(tmp_path / "adam.states"))
    train(loaded_net, loaded, data[25:])
    assert_same_training((loaded_net, loaded), (written_net, written))
    assert training.report(loaded)["fused_steps"] == 25


def test_two_contexts_update_each_copy_fused():
    """Parameters on two CPU contexts, update_on_kvstore=False: the kvstore sums the
    gradients, each context's updater updates its copy (its own update counts),
    fused; with the kvstore updating (MXNet's default for several devices) no
    updater is called and the report says so."""
    contexts = [mx.cpu(0), mx.cpu(1)]

    def two_context_run(fused, **trainer_options):
        net = build(SmallModel)
        net.collect_params().reset_ctx(contexts)
        trainer = gluon.Trainer(net.collect_params(), "adam", options("adam"),
                                **trainer_options)
        if fused:
            gluon_dyn.fused_updates(trainer)
        for x, y, rows in batches(SmallModel):
            with autograd.record():
                losses = [((net(mx.nd.array(part, ctx=c)) - mx.nd.array(target, ctx=c)) ** 2)
                          .sum() for part, target, c in zip(np.array_split(x, 2),
                                                           np.array_split(y, 2), contexts)]
            autograd.backward(losses)
            trainer.step(rows)
        return net, trainer

    fused = two_context_run(True, update_on_kvstore=False)
    written = two_context_run(False, update_on_kvstore=False)
    for name, p in fused[0].collect_params().items():
        for a, b in zip(p.list_data(), written[0].collect_params()[name].list_data()):
            np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-5, atol=1e-5)
    assert_same_training(fused, written)
    assert training.report(fused[1])["fused_steps"] == 2 * STEPS

    on_kvstore = two_context_run(True)[1]
    done = training.report(on_kvstore)
    assert done["fused_steps"] == 0 and done["kvstore"].startswith("update_on_kvstore")


def test_plans_of_replaced_arrays_are_not_kept():
    """Plans keep their arrays alive: plans for subsets of the same arrays (steps
    skipping stale parameters) are kept together, new arrays start afresh."""
    from gluon_dyn.training.fused_updater import Fusion
    optimizer = mx.optimizer.Adam()
    fusion = Fusion()
    weights, grads = [mx.nd.ones((2, 3)), mx.nd.ones(4)], [mx.nd.ones((2, 3)), mx.nd.ones(4)]
    fusion.plan(optimizer, weights, grads)
    fusion.plan(optimizer, weights[:1], grads[:1])
    assert len(fusion.plans) == 2
    replaced = [w.copy() for w in weights]
    assert fusion.plan(optimizer, replaced, grads).groups == [[0, 1]]
    assert [[id(w) for w in kept[0]] for kept in fusion.plans.values()] == [
        [id(w) for w in replaced]]


def test_unsupported_optimizer_says_why_once_and_runs_mxnets_loop():
    opts = {"learning_rate": 0.01, "momentum": 0.9, "wd": 0.01}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fused = run("nag", dict(opts), True)
    written = run("nag", dict(opts), False)
    assert_same_training(fused[:2], written[:2])
    said = [str(w.message) for w in caught if "fused_updates" in str(w.message)]
    assert said == ["gluon_dyn.fused_updates: MXNet's loop updates: no fused update for "
                    "optimizer NAG (fused: SGD, Adam, AdaGrad, RMSProp)"]
    done = training.report(fused[1])
    assert done["fused_steps"] == 0 and done["op_calls"] == {}
    assert done["loop_steps"] == {"no fused update for optimizer NAG "
                                  "(fused: SGD, Adam, AdaGrad, RMSProp)": STEPS}


def test_float16_adagrad_without_multi_precision_is_mxnets_loop():
    """MXNet's AdaGrad keeps a float32 history: with float16 weights and no
    multi_precision its own loop fails; the fused trainer leaves the call to that
    loop (and its error), saying why."""
    net = build(HalfModel)
    trainer = gluon_dyn.fused_updates(gluon.Trainer(net.collect_params(), "adagrad"))
    with pytest.warns(UserWarning, match="AdaGrad keeps float32 states"):
        with pytest.raises(mx.base.MXNetError):
            train(net, trainer, batches(HalfModel, steps=1))
    assert list(training.report(trainer)["loop_steps"].values()) == [1]


def test_not_a_trainer():
    with pytest.raises(TypeError, match="fused_updates takes a gluon.Trainer .* got Dense"):
        gluon_dyn.fused_updates(gluon.nn.Dense(2))


@pytest.fixture(scope="module")
def horovod_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("fused_horovod")
    local_workers.run([sys.executable, os.path.join(HERE, "fused_updates_worker.py"), str(out)],
                      size=2, env=dict(os.environ, OMP_NUM_THREADS="1"))
    return {(name, rank): dict(np.load(out / ("%s-rank%d.npz" % (name, rank))))
            for name in worker.CASES for rank in range(2)}


@pytest.mark.parametrize("case", sorted(worker.CASES))
def test_horovod_two_workers_equal_one_process(horovod_results, case):
    """hvd.DistributedTrainer with fused updates, each worker on half of every batch:
    both workers equal one process stepping on whole batches with trainer.step as
    written, and their updates ran fused (after Horovod's allreduce)."""
    reference = worker.train_one_process(case)
    for rank in range(2):
        result = horovod_results[case, rank]
        assert int(result["fused_steps"]) == worker.STEPS
        for name, value in reference.items():
            np.testing.assert_allclose(result["param:" + name], value, rtol=1e-5, atol=1e-5,
                                       err_msg="rank %d %s" % (rank, name))
