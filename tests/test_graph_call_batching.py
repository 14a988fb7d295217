"""Graph calls batched across a training step (hybridize(dynamic=True,
batch_calls=True), call_batching.py's GRAPH_BATCH): a step's recorded model calls
and the loss applied to their results run as one graph traced from a CallBatch.
Each test runs the step as written and batched and compares losses, gradients,
parameters after the optimizer's update and the Python state (allclose 1e-5), and
asserts which calls the batches' graphs served: the batched path, not the calls'
own graphs."""
import os
import sys
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_dyn
from dynamic_twins import assert_same, copy_parameters, gradients, parameter_values

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "examples", "train"))
import gan  # noqa: E402  (examples/train: the GAN's blocks as its script writes them)

from gluon_dyn.hybridize.call import call_batching  # noqa: E402

BATCH = 16
OPTIONS = dict(check_speed=False, batch_calls=True)
PROFILED = 3     # calls hybridize(dynamic=True) profiles before serving


def report(block):
    return gluon_dyn.hybridize.report(block)


def batched(block):
    return report(block)["batched_calls"]


def made_alike(make, options):
    """(imperative, dynamic) blocks of `make()` with the same parameters, the second
    hybridized with `options`."""
    blocks = []
    for _ in range(2):
        mx.random.seed(0)
        block = make()
        block.initialize(mx.init.Xavier())
        blocks.append(block)
    copy_parameters(blocks[0], blocks[1])
    blocks[1].hybridize(dynamic=True, **options)
    return blocks


class GanStep:
    """examples/train/gan.py's step on one copy of its blocks: the discriminator on
    real and generated images, then the generator through the discriminator."""

    def __init__(self, generator, discriminator):
        self.generator, self.discriminator = generator, discriminator
        options = {"learning_rate": 0.01, "beta1": 0.5}
        self.g_trainer = gluon.Trainer(generator.collect_params(), "adam", dict(options))
        self.d_trainer = gluon.Trainer(discriminator.collect_params(), "adam", dict(options))
        self.bce = gluon.loss.SigmoidBinaryCrossEntropyLoss()

    def __call__(self, step):
        rng = np.random.RandomState(step)
        real = mx.nd.array(rng.uniform(-1, 1, (BATCH, 64)))
        ones, zeros = mx.nd.ones((BATCH,)), mx.nd.zeros((BATCH,))
        mx.random.seed(step)     # the dropout masks: drawn alike in both runs
        fake = self.generator(mx.nd.array(rng.randn(BATCH, gan.NOISE)))
        with autograd.record():
            d_loss = (self.bce(self.discriminator(real), ones)
                      + self.bce(self.discriminator(fake.detach()), zeros))
        d_loss.backward()
        d_grads = {name: grad.copy() for name, grad in gradients(self.discriminator).items()}
        self.d_trainer.step(BATCH)
        with autograd.record():
            g_loss = self.bce(self.discriminator(self.generator(
                mx.nd.array(rng.randn(BATCH, gan.NOISE)))), ones)
        g_loss.backward()
        g_grads = gradients(self.generator)
        self.g_trainer.step(BATCH)
        return {"losses": [d_loss, g_loss], "discriminator gradients": d_grads,
                "generator gradients": g_grads,
                "parameters": [parameter_values(self.generator),
                               parameter_values(self.discriminator)]}


def test_a_gan_step_runs_each_of_its_parts_as_one_graph_as_written():
    """The script's blocks, dropout on: the discriminator's two calls and both
    losses make one batch; the generator, the discriminator on its images and the
    loss another, across the two blocks."""
    generators = made_alike(lambda: gan.Generator(32, prefix="generator_"), OPTIONS)
    discriminators = made_alike(lambda: gan.Discriminator(32, prefix="discriminator_"), OPTIONS)
    imperative, dynamic = GanStep(generators[0], discriminators[0]), \
        GanStep(generators[1], discriminators[1])
    steps = 10
    for step in range(steps):
        assert_same(dynamic(step), imperative(step), "step %d" % step, scaled=True)
    discriminator, generator = discriminators[1], generators[1]
    d_batches, g_batches = batched(discriminator), batched(generator)
    # Per step once profiled: d(real), bce, d(fake), bce in one batch (run by the
    # `+`, an operator); generator, d(...), bce in the other (run by backward).
    assert d_batches["batch_sizes"][-5:] == [4] * 5
    assert g_batches["batch_sizes"][-5:] == [3] * 5
    # The CallBatch of the discriminator's full batches (both losses made one call,
    # rowwise_losses.py) is its last; an earlier one ran the first partial batches.
    d_served, (g_served,) = d_batches["call_batches"][-1], g_batches["call_batches"]
    assert d_batches["call_batch_traces"][-1] == 1 and g_batches["call_batch_traces"] == [1]
    assert d_batches["loss_calls_merged"] == 2 * d_batches["batch_sizes"].count(4)
    assert d_served["graph"] >= steps - 2 * PROFILED and d_served["fallback"] == 0
    assert g_served["graph"] >= steps - 2 * PROFILED and g_served["fallback"] == 0
    # The discriminator is called three times a step; each call of a batch a graph
    # served counts as batched, on graphs.
    calls = report(discriminator)["calls"]
    assert calls["by_kind"]["batched"] == 2 * d_served["graph"] + g_served["graph"]
    assert calls["graph"] >= 0.6 * calls["total"]
    assert report(generator)["calls"]["by_kind"]["batched"] == g_served["graph"]


class Classifier(gluon.Block):
    """A Block whose forward loops as many times as a tensor says (speculated: the
    loop unrolled behind a guard on its trip count, in its first graphs)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.hidden = gluon.nn.Dense(16, in_units=8, activation="relu")
            self.out = gluon.nn.Dense(4, in_units=16)

    def forward(self, x):
        h = self.hidden(x)
        steps = mx.nd.zeros((1,))
        while mx.nd.sum(steps) < mx.nd.sum(x[0] > 0):
            h = h * 0.9
            steps = steps + 1
        return self.out(h)


class KeepsLast(Classifier):
    """The same, keeping its output on the block (state a later line may read)."""

    def forward(self, x):
        self.last = super().forward(x)
        return self.last


LOSS = gluon.loss.SoftmaxCrossEntropyLoss()


def classifier_step(block, trainer, x, labels, between=None):
    """A classifier's step, the loss applied to the model's result; `between(out)`
    runs between the call and the loss."""
    with autograd.record():
        out = block(x)
        if between is not None:
            between(out)
        loss = LOSS(out, labels)
    loss.backward()
    grads = {name: grad.copy() for name, grad in gradients(block).items()}
    trainer.step(len(labels))
    return {"loss": loss, "gradients": grads, "parameters": parameter_values(block)}


def classifier_twins(make=Classifier):
    blocks = made_alike(lambda: make(prefix="classifier_"), OPTIONS)
    trainers = [gluon.Trainer(block.collect_params(), "sgd", {"learning_rate": 0.1})
                for block in blocks]
    return blocks, trainers


def batch_of(step, sign=1.0):
    rng = np.random.RandomState(step)
    return (mx.nd.array(sign * np.abs(rng.randn(BATCH, 8))),
            mx.nd.array(rng.randint(0, 4, BATCH)))


def run_steps(blocks, trainers, steps, between=None, sign=lambda step: 1.0):
    for step in steps:
        x, labels = batch_of(step, sign(step))
        got, expected = [classifier_step(block, trainer, x, labels, between)
                         for block, trainer in zip(blocks[::-1], trainers[::-1])]
        assert_same(got, expected, "step %d" % step, scaled=True)


def test_the_model_and_its_loss_run_as_one_graph():
    blocks, trainers = classifier_twins()
    run_steps(blocks, trainers, range(10))
    report_ = batched(blocks[1])
    assert report_["batch_sizes"][-5:] == [2] * 5
    (served,) = report_["call_batches"]
    assert served["graph"] >= 10 - 2 * PROFILED - 1
    assert report(blocks[1])["calls"]["by_kind"]["batched"] == served["graph"]


class Doubling(Classifier):
    """The same, doubling its output where a Python value on the block says so."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.doubled = False

    def forward(self, x):
        out = super().forward(x)
        return out * 2 if self.doubled else out


def test_a_deferred_call_repeating_the_last_is_not_keyed_again_until_its_python_values_change(
        monkeypatch):
    """A deferred call's output type comes from the graph its key finds; a call
    repeating the latest one (same arrays' shapes, modes and Python values:
    RepeatedCall) takes that graph's without the key made again, and a changed Python
    value on the block is keyed again (another graph, doubling). The batch's call
    (a CallBatch's, on the same calls of arrays of the same shapes) is alike."""
    from gluon_dyn.hybridize.call import runner
    keyed = []
    monkeypatch.setattr(runner, "key_for", lambda block, *args, key_for=runner.key_for:
                        keyed.append(type(block).__name__) or key_for(block, *args))
    blocks, trainers = classifier_twins(Doubling)
    run_steps(blocks, trainers, range(8))
    for start, doubled in ((8, True), (12, False), (16, True)):
        for block in blocks:
            block.doubled = doubled
        keyed_by_step, batches_keyed = [], []
        for step in range(start, start + 4):
            keyed.clear()
            run_steps(blocks, trainers, [step])
            keyed_by_step.append(keyed.count("Doubling"))
            batches_keyed.append(keyed.count("CallBatch"))
        # The new value is keyed (its graph made, then its results' types seen, the
        # model called at once meanwhile); then each step's deferred call repeats the
        # one before, in a batch of two with its loss, which repeats the batch before.
        assert keyed_by_step[0] >= 1 and keyed_by_step[2:] == [0, 0], keyed_by_step
        assert sum(batches_keyed) >= 1 and batches_keyed[-1] == 0, batches_keyed
        assert batched(blocks[1])["batch_sizes"][-2:] == [2, 2]
    assert batched(blocks[1])["call_batches"][-1]["graph"] >= 1


def test_a_loop_on_a_tensor_in_a_batch_loops_as_each_steps_data_says():
    """The model's own graphs unroll the loop as often as its profile saw (8 times,
    behind a guard); the batch's graph, traced from calls its profile saw served by
    those graphs, keeps it a graph loop: steps whose inputs loop no time run on it
    too, as written."""
    blocks, trainers = classifier_twins()
    flipped = {9, 12}
    run_steps(blocks, trainers, range(14), sign=lambda step: -1.0 if step in flipped else 1.0)
    assert "while: unrolled 8 iterations (speculated, guarded)" in \
        report(blocks[1])["statements"].values()
    report_ = batched(blocks[1])
    (served,) = report_["call_batches"]
    # Steps 0-3: the model's profile and first graph call; 4-6: the batch's profile.
    assert served["graph"] == 14 - 4 - PROFILED and served["guard_failed"] == 0
    assert report(blocks[1])["calls"]["by_kind"]["batched"] == served["graph"]


def test_a_results_shape_read_does_not_run_the_batch_and_an_operator_does():
    blocks, trainers = classifier_twins()
    run_steps(blocks, trainers, range(6))
    shapes = []
    run_steps(blocks, trainers, range(6, 10), between=lambda out: shapes.append(out.shape))
    assert shapes == [(BATCH, 4)] * 8
    report_ = batched(blocks[1])
    assert report_["batch_sizes"][-4:] == [2] * 4
    run_steps(blocks, trainers, range(10, 13), between=lambda out: mx.nd.ones((2,)))
    report_ = batched(blocks[1])
    assert report_["batch_sizes"][-3:] == [1] * 3
    assert report_["flushed_by"]["an operator run"] == 3


def test_a_call_that_keeps_state_on_its_block_runs_at_once():
    blocks, trainers = classifier_twins(KeepsLast)
    run_steps(blocks, trainers, range(8))
    report_ = batched(blocks[1])
    assert report_["deferred_calls"] == 0
    (why,) = report_["graph_calls_run_at_once"]
    assert why.startswith("its graph has effects besides the arrays it returns")
    assert_same(blocks[1].last, blocks[0].last, "the state left on the block")
    assert report(blocks[1])["calls"]["by_kind"]["graph"] >= 8 - PROFILED


class CountsOutliers(Classifier):
    """The same, counting on the block the calls on outliers, on a path its graphs
    do not take (speculated: behind a guard), and refusing far-out inputs."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.outliers = 0

    def forward(self, x):
        out = super().forward(x)
        if mx.nd.max(x) > 10:
            self.outliers += 1
        if mx.nd.max(x) > 20:
            raise ValueError("an input beyond 20")
        return out


def two_call_step(block, x, y, labels):
    """A step calling the model twice (a GAN's discriminator on real and generated
    data): one batch of two model calls and two losses."""
    with autograd.record():
        loss = LOSS(block(x), labels) + LOSS(block(y), labels)
    loss.backward()
    return {"loss": loss, "gradients": gradients(block)}


def outlier_twins():
    """Twins of CountsOutliers, stepped until their calls run in batches (the first
    ones run as written, as the batches' profile)."""
    blocks = made_alike(lambda: CountsOutliers(prefix="classifier_"), OPTIONS)
    for step in range(8):
        x, labels = batch_of(step)
        results = [two_call_step(block, x, x * 0.5, labels) for block in blocks[::-1]]
        assert_same(results[0], results[1], "step %d" % step, scaled=True)
        if batched(blocks[1])["batches"]:
            return blocks
    raise AssertionError("the calls were never batched: %s" % batched(blocks[1]))


def profiled_batches(block):
    return batched(block)["call_batches"][-1]["profiling"]


def test_a_call_raising_in_a_batch_leaves_the_python_state_the_calls_before_it_left():
    """A batch run as written (its profile): the first call counts its outlier, the
    second raises. The error is the program's, raised once: the first call is not
    made again."""
    blocks = outlier_twins()
    x, labels = batch_of(8)
    profiled = profiled_batches(blocks[1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # the block runs as Python from here on
        for block in blocks:
            with pytest.raises(ValueError, match="beyond 20"):
                two_call_step(block, x + 15, x + 25, labels)
    assert profiled_batches(blocks[1]) == profiled + 1
    assert [block.outliers for block in blocks] == [2, 2]
    assert batched(blocks[1])["gave_up"] is None


def test_a_batch_failing_after_its_calls_ran_takes_their_results(monkeypatch):
    """An internal error after a batch's calls ran as written (its profile; one call
    counted an outlier): the batch runs as written again, taking the results of the
    calls that ran, so no Python effect happens twice; batching stops, said once."""
    blocks = outlier_twins()
    run = call_batching.Batcher.run

    def failing_after(batcher, batch):
        run(batcher, batch)
        raise RuntimeError("an internal error after the calls ran")

    monkeypatch.setattr(call_batching.Batcher, "run", failing_after)
    x, labels = batch_of(8)
    profiled = profiled_batches(blocks[1])
    with pytest.warns(UserWarning, match="an internal error after the calls ran"):
        got = two_call_step(blocks[1], x + 15, x * 0.5, labels)
    expected = two_call_step(blocks[0], x + 15, x * 0.5, labels)
    assert_same(got, expected, "the step", scaled=True)
    assert [block.outliers for block in blocks] == [1, 1]
    assert profiled_batches(blocks[1]) == profiled + 1


class Cell(gluon.Block):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.step = gluon.nn.Dense(8, in_units=8, activation="tanh")

    def forward(self, h):
        return self.step(h)


def run_chains(blocks, step, length):
    """The cell applied `length` times to a step's array, then summed, on each block."""
    results = []
    for block in blocks:
        h = mx.nd.array(np.random.RandomState(step).randn(4, 8))
        with autograd.record():
            for _ in range(length):
                h = block(h)
            total = h.sum()
        total.backward()
        results.append({"h": h, "gradients": gradients(block)})
    assert_same(results[1], results[0], "step %d" % step, scaled=True)


def test_a_chain_of_calls_runs_in_batches_of_at_most_the_limit():
    """A cell stepped in a Python loop: its calls chain; a batch runs at
    MAX_GRAPH_BATCH_CALLS calls (a graph per chain length would be traced otherwise)."""
    blocks = made_alike(lambda: Cell(prefix="cell_"), OPTIONS)
    for step in range(3):
        run_chains(blocks, step, call_batching.MAX_GRAPH_BATCH_CALLS + 8)
    report_ = batched(blocks[1])
    assert max(report_["batch_sizes"]) == call_batching.MAX_GRAPH_BATCH_CALLS
    assert report_["flushed_by"]["%d calls batched" % call_batching.MAX_GRAPH_BATCH_CALLS] >= 1


def test_chains_of_a_new_length_at_every_step_leave_graph_batching_for_good():
    """A cell stepped as many times as each step's data says: every batch is a new
    sequence of calls, a graph each; once its CallBatch gives up on graphs (the
    arguments' structure differs on most calls), the calls run on their own graphs,
    no longer deferred."""
    blocks = made_alike(lambda: Cell(prefix="cell_"), OPTIONS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # the CallBatch's giving up, said once
        for step in range(20):
            run_chains(blocks, step, 2 + step)
    report_ = batched(blocks[1])
    assert "structure differs" in report_["graphs_gave_up"]
    assert report_["batch_sizes"][-1] < 2 + step   # the last steps' calls not deferred
    assert report(blocks[1])["calls"]["by_kind"]["graph"] >= 2 + step


def test_calls_of_blocks_batching_with_other_options_run_in_batches_of_their_own():
    generators = made_alike(lambda: gan.Generator(16, prefix="generator_"), OPTIONS)
    discriminators = made_alike(lambda: gan.Discriminator(16, prefix="discriminator_"),
                                dict(OPTIONS, profile_calls=2))
    steps = [GanStep(g, d) for g, d in zip(generators, discriminators)]
    for step in range(8):
        assert_same(steps[1](step), steps[0](step), "step %d" % step, scaled=True)
    # The generator's batch cannot take the discriminator's call: it runs alone, and
    # the discriminator's call on its result and the loss make a batch of their own.
    assert batched(generators[1])["batch_sizes"][-3:] == [1] * 3
    assert batched(discriminators[1])["batch_sizes"][-4:] == [4, 2, 4, 2]


@pytest.mark.parametrize("name, batched_calls", [("gluonnlp_bert_classifier", 4)])
def test_a_corpus_programs_step_runs_its_model_and_loss_as_one_graph(name, batched_calls):
    """GluonNLP's BERT fine-tuned as its scripts write the step (the corpus's
    program: SoftmaxCELoss made anew and applied to the model's result, then
    `.mean()`): run_twins checks every step's loss, gradients and parameters."""
    import dataclasses
    import corpus
    from corpus import compare
    (program,) = [program for program in corpus.programs() if program.name == name]
    program = dataclasses.replace(program, train_steps=8)
    _, dynamic, _ = compare.run_twins(program, options=OPTIONS)
    # Steps 0-3: the model's first recorded calls, and the batch's profile.
    assert report(dynamic)["calls"]["by_kind"]["batched"] == batched_calls
    report_ = batched(dynamic)
    assert report_["batch_sizes"][-batched_calls:] == [2] * batched_calls
    # The loss made anew at each step is the same loss: one graph serves every batch.
    assert report_["call_batch_traces"] == [1]
