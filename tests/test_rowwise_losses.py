"""A batch's calls of one stock Gluon loss run as one call on their rows
(rowwise_losses.py), under hybridize(dynamic=True, batch_calls=True). Each test runs
a training step written per call as written and batched, compares losses,
parameter gradients and input gradients (1e-5), and asserts how many loss calls
were merged: the merged path ran, or, where a loss is not row by row, did not."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_dyn
import recursive_programs as programs
from dynamic_twins import assert_same, copy_parameters, gradients, parameter_values
from recursion_twins import assert_same_results, input_vectors, pair, trees

from gluon_dyn.hybridize.call import call_batching

STEPS = 7


def merged(block):
    return gluon_dyn.hybridize.report(block)["batched_calls"]["loss_calls_merged"]


def per_batch(block, calls, count):
    """Whether the steps after the first few (whose calls run one by one, then in
    partial batches, while the recursion engine profiles) ran their `calls` as one
    batch, `count` loss calls of each merged, and the recursion engine served the
    batches after the CallBatch's profile."""
    report = gluon_dyn.hybridize.report(block)["batched_calls"]
    full = report["batch_sizes"].count(calls)
    served = report["call_batches"][-1]     # the CallBatch of a step's calls, merged
    return full >= STEPS - 3 and merged(block) >= count * full and served["recursion"] >= 2


def labels_of(calls, seed):
    rng = np.random.RandomState(seed)
    return [mx.nd.array(rng.randint(0, programs.CLASSES, len(call))) for call in calls]


def tree_step(block, trainer, calls, losses):
    """One step calling `block` on each list of trees in `calls`, `losses(outs,
    labels)` giving the losses to add up; (the losses, parameter gradients, leaf
    vector gradients) as NumPy, after the trainer's update."""
    vectors = input_vectors(calls)
    for vector in vectors:
        vector.attach_grad()
    labels = labels_of(calls, len(vectors))
    with autograd.record():
        values = losses([block(call) for call in calls], labels)
        total = mx.nd.add_n(*[value.sum() for value in values])
    total.backward()
    grads = {name[len(block.prefix):]: param.grad().asnumpy().copy()
             for name, param in block.collect_params().items()}
    trainer.step(sum(len(call) for call in calls))
    return ([value.asnumpy() for value in values], grads,
            [vector.grad.asnumpy() for vector in vectors])


def run_tree_steps(losses, sizes, steps=STEPS):
    """Steps of calls on `sizes[k]` trees each (`sizes`: a list, or a function of
    the step giving one), as written and batched; returns the batched block."""
    blocks = pair(programs.TreeRNN, check_speed=False, batch_calls=True)
    trainers = [gluon.Trainer(block.collect_params(), "sgd", {"learning_rate": 0.1})
                for block in blocks]
    sizes_of = sizes if callable(sizes) else lambda step: sizes
    for step in range(steps):
        sizes = sizes_of(step)
        forest = trees(300 + step, sum(sizes), leaves=(2, 8), vectors=True)
        calls = [forest[sum(sizes[:k]):sum(sizes[:k + 1])] for k in range(len(sizes))]
        expected, got = [tree_step(block, trainer, calls, losses)
                         for block, trainer in zip(blocks, trainers)]
        assert_same_results(expected, got)
    return blocks[1]


SCE = gluon.loss.SoftmaxCrossEntropyLoss()


def per_call(loss):
    return lambda outs, labels: [loss(out, label) for out, label in zip(outs, labels)]


def test_a_steps_per_tree_losses_run_as_one_loss_call_as_written():
    block = run_tree_steps(per_call(SCE), [1] * 5)
    assert per_batch(block, 10, 5)


def test_calls_of_unequal_rows_get_their_own_rows_back():
    block = run_tree_steps(per_call(SCE), [2, 1, 3, 1])
    assert per_batch(block, 8, 4)


def test_steps_of_other_calls_keep_one_merged_loss_and_its_batches_block():
    """Trees per call and calls per step change from step to step: the rows are an
    argument of the merged loss, so the step's calls keep one CallBatch (its
    recursion engine traces per signature), served once profiled."""
    shapes = [[1, 2], [2, 1, 1], [1, 1, 1, 1], [3, 1], [1, 2, 1], [2, 2]]
    block = run_tree_steps(per_call(SCE), lambda step: shapes[step % len(shapes)], steps=14)
    report = gluon_dyn.hybridize.report(block)["batched_calls"]
    served = report["call_batches"][-1]
    # The first partial batches (a loss alone) ran on CallBatches of their own.
    assert served["profiling"] + served["recursion"] >= 12 and served["recursion"] >= 8
    assert merged(block) >= sum(len(shape) for shape in shapes)


def test_a_call_reading_a_loss_result_runs_after_the_losses_before_it():
    """L2Loss reads the third SoftmaxCE result: the first three merge and run before
    it; the last two merge after it."""
    l2 = gluon.loss.L2Loss()

    def losses(outs, labels):
        values = [SCE(out, label) for out, label in zip(outs[:3], labels)]
        values.append(l2(values[2], mx.nd.ones((1,))))
        return values + [SCE(out, label) for out, label in zip(outs[3:], labels[3:])]
    block = run_tree_steps(losses, [1] * 5)
    assert per_batch(block, 11, 5)


class OwnLoss(gluon.loss.SoftmaxCrossEntropyLoss):
    """A subclass: its forward may be anything, so it is not merged."""


@pytest.mark.parametrize("losses", [
    lambda outs, labels: [SCE(out, label, mx.nd.ones((1, 1)) * 0.5)
                          for out, label in zip(outs, labels)],
    lambda outs, labels: [
        gluon.loss.SoftmaxCrossEntropyLoss(axis=0, sparse_label=False)(
            out, mx.nd.one_hot(label, programs.CLASSES)) for out, label in zip(outs, labels)],
    lambda outs, labels: [gluon.loss.KLDivLoss(from_logits=False)(out, mx.nd.softmax(out))
                          for out in outs],
    per_call(OwnLoss()),
], ids=["sample weights", "softmax over rows", "KL divergence", "a subclass"])
def test_losses_that_are_not_row_by_row_run_as_written(losses):
    block = run_tree_steps(losses, [1] * 4)
    assert merged(block) == 0
    assert gluon_dyn.hybridize.report(block)["batched_calls"]["gave_up"] is None


def test_rows_unlike_those_a_call_was_deferred_with_fail_the_batch(monkeypatch):
    """The merge takes a result's rows and columns from the type its call was
    deferred with; the arrays computed are checked before any result is handed out
    (here each model call is said to return two columns too many)."""
    add = call_batching.Batch.add

    def wrong_rows(self, block, args, output_type, known=None, expected=False):
        result = add(self, block, args, output_type, known, expected)
        if expected:
            (rows, _), dtype = self.types[-1]
            self.types[-1] = ((rows, programs.CLASSES + 2), dtype)
        return result
    monkeypatch.setattr(call_batching.Batch, "add", wrong_rows)
    with pytest.warns(UserWarning, match="no longer batched.*merged by rows"):
        block = run_tree_steps(per_call(SCE), [2, 1, 2])
    assert merged(block) == 0 and "merged by rows" in \
        gluon_dyn.hybridize.report(block)["batched_calls"]["gave_up"]


class Classifier(gluon.Block):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.hidden = gluon.nn.Dense(16, activation="relu", in_units=8)
            self.out = gluon.nn.Dense(4, in_units=16)

    def forward(self, x):
        return self.out(self.hidden(x))


def classifier_step(block, trainer, parts):
    """A step applying SoftmaxCE and L2Loss to each part's result."""
    l2 = gluon.loss.L2Loss()
    with autograd.record():
        values = []
        for x, labels, one_hot in parts:
            out = block(x)
            values += [SCE(out, labels), l2(out, one_hot)]
        total = mx.nd.add_n(*[value.sum() for value in values])
    total.backward()
    grads = {name: grad.copy() for name, grad in gradients(block).items()}
    trainer.step(sum(len(labels) for _, labels, _ in parts))
    return {"losses": values, "gradients": grads, "parameters": parameter_values(block)}


def test_graph_calls_losses_of_unequal_rows_run_as_one_call_each():
    blocks = []
    for _ in range(2):
        mx.random.seed(0)
        blocks.append(Classifier(prefix="classifier_"))
        blocks[-1].initialize(mx.init.Xavier())
    copy_parameters(blocks[0], blocks[1])
    blocks[1].hybridize(dynamic=True, check_speed=False, batch_calls=True)
    trainers = [gluon.Trainer(block.collect_params(), "sgd", {"learning_rate": 0.1})
                for block in blocks]
    for step in range(10):
        rng = np.random.RandomState(step)
        parts = []
        for rows in (3, 5, 3):
            labels = mx.nd.array(rng.randint(0, 4, rows))
            parts.append((mx.nd.array(rng.randn(rows, 8)), labels, mx.nd.one_hot(labels, 4)))
        expected, got = [classifier_step(block, trainer, parts)
                         for block, trainer in zip(blocks, trainers)]
        assert_same(got, expected, "step %d" % step, scaled=True)
    report = gluon_dyn.hybridize.report(blocks[1])
    batches = report["batched_calls"]["batch_sizes"]
    (served,) = report["batched_calls"]["call_batches"]
    # Each batch: a step's three calls, its three SoftmaxCE calls made one, its three
    # L2Loss calls made one; the batch's graph served the batches after its profile.
    assert batches.count(9) >= 7 and merged(blocks[1]) == 6 * batches.count(9)
    assert served["graph"] >= 4 and report["calls"]["by_kind"]["batched"] == 3 * served["graph"]
