"""Calls batched across a training step (hybridize(dynamic=True, batch_calls=True),
hybridize/call/call_batching.py): a step that calls a recursive model once per tree
and applies the loss to each result runs as one batch on the recursion engine, with
the outputs, gradients and parameters of the step as written; anything that could
see the calls run late runs them first."""
import gc
import subprocess
import sys
import weakref

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_dyn
import recursive_programs as programs
from recursion_twins import assert_same_results, pair, trees

TREES_PER_STEP = 5
PROFILED = 3     # calls hybridize(dynamic=True) profiles before serving


@pytest.fixture
def twins():
    imperative, dynamic = pair(programs.TreeRNN, check_speed=False, batch_calls=True)
    return imperative, dynamic


def step_data(step):
    stream = trees(100 + step, TREES_PER_STEP, leaves=(2, 10), vectors=True)
    labels = [mx.nd.array([tree.label]) for tree in stream]
    return stream, labels


def per_tree_losses(block, stream, labels):
    loss = gluon.loss.SoftmaxCrossEntropyLoss()
    return [loss(block([tree]), label) for tree, label in zip(stream, labels)]


def run_step(block, trainer, step, between_calls=None):
    """One training step written per tree: (the summed loss, parameter gradients,
    leaf vector gradients) as NumPy, after the trainer's update."""
    stream, labels = step_data(step)
    vectors = [leaf.vector for tree in stream for leaf in leaves(tree)]
    for vector in vectors:
        vector.attach_grad()
    with autograd.record():
        losses = []
        for tree, label in zip(stream, labels):
            losses.append(LOSS(block([tree]), label))
            if between_calls is not None:
                between_calls(block, losses)
        total = mx.nd.add_n(*losses)
    total.backward()
    gradients = {name[len(block.prefix):]: param.grad().asnumpy().copy()
                 for name, param in block.collect_params().items()}
    trainer.step(TREES_PER_STEP)
    return total.asnumpy(), gradients, [vector.grad.asnumpy() for vector in vectors]


LOSS = gluon.loss.SoftmaxCrossEntropyLoss()


def leaves(tree):
    return [tree] if tree.is_leaf() else [leaf for child in tree.children for leaf in leaves(child)]


def trainers(*blocks):
    return [gluon.Trainer(block.collect_params(), "sgd", {"learning_rate": 0.1})
            for block in blocks]


def batched(block):
    return gluon_dyn.hybridize.report(block)["batched_calls"]


def test_a_step_of_per_tree_calls_runs_as_one_batch_as_written(twins):
    imperative, dynamic = twins
    trainer_imperative, trainer_dynamic = trainers(imperative, dynamic)
    for step in range(8):
        assert_same_results(run_step(imperative, trainer_imperative, step),
                            run_step(dynamic, trainer_dynamic, step))
        for a, b in zip(imperative.collect_params().values(), dynamic.collect_params().values()):
            np.testing.assert_allclose(b.data().asnumpy(), a.data().asnumpy(),
                                       rtol=1e-5, atol=1e-5)
    report = batched(dynamic)
    # The first steps' calls run one by one until the engine served one; then each
    # step's 5 model calls and 5 loss calls make one batch, run when add_n reads it.
    full = [count for count in report["batch_sizes"] if count == 2 * TREES_PER_STEP]
    assert len(full) >= 6 and report["flushed_by"] == {"a result used": report["batches"]}
    # A CallBatch per set of callees (the first partial batch's, the full batches'
    # with their losses merged, rowwise_losses.py), each profiling its first batches.
    served = report["call_batches"]
    recursion = sum(kinds["recursion"] for kinds in served)
    assert recursion == report["batches"] - sum(kinds["profiling"] for kinds in served)
    assert recursion >= 3 and not any(kinds["fallback"] for kinds in served)
    assert report["loss_calls_merged"] == TREES_PER_STEP * len(full)
    # Each model call of a batch the engine served counts as served on graphs.
    calls = gluon_dyn.hybridize.report(dynamic)["calls"]
    assert calls["by_kind"]["batched"] == TREES_PER_STEP * recursion
    assert calls["graph"] == calls["total"] - PROFILED


def test_a_result_read_between_calls_runs_the_calls_made_so_far(twins):
    imperative, dynamic = twins
    trainer_imperative, trainer_dynamic = trainers(imperative, dynamic)

    def read_last(block, losses):
        float(losses[-1].asscalar())

    for step in range(6):
        assert_same_results(run_step(imperative, trainer_imperative, step, read_last),
                            run_step(dynamic, trainer_dynamic, step, read_last))
    assert set(batched(dynamic)["batch_sizes"][-3:]) == {2}


def test_a_write_after_a_call_is_not_seen_by_it(twins):
    """Parameters and inputs written (in place, through an operator or from NumPy)
    after a call and before its result is used: the call computed with what it
    was given."""
    imperative, dynamic = twins
    trainer_imperative, trainer_dynamic = trainers(imperative, dynamic)
    for step in range(4):     # until the engine serves the dynamic block
        run_step(imperative, trainer_imperative, step)
        run_step(dynamic, trainer_dynamic, step)
    writes = [lambda block, tree: block.out.bias.set_data(mx.nd.ones_like(block.out.bias.data())),
              lambda block, tree: leaves(tree)[0].vector.__setitem__(slice(None), 2.0),
              lambda block, tree: leaves(tree)[0].vector.__setitem__(
                  slice(None), np.full(programs.EMBED, 3.0, dtype=np.float32))]
    for number, write in enumerate(writes):
        results = []
        for block in (imperative, dynamic):
            tree = step_data(50 + number)[0][0]
            with autograd.record():
                out = block([tree])
                with autograd.pause():     # MXNet refuses writes while recording
                    write(block, tree)
                again = block([tree])
            results.append((out.asnumpy(), again.asnumpy()))
        np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-5, atol=1e-5)
    assert batched(dynamic)["flushed_by"]["an array written"] == len(writes)


def test_arrays_made_between_calls_do_not_run_the_batch(twins):
    _, dynamic = twins
    (trainer,) = trainers(dynamic)
    for step in range(5):
        stream, _ = step_data(step)
        with autograd.record():
            # mx.nd.array copies from NumPy into an array made after the batch began
            losses = [LOSS(dynamic([tree]), mx.nd.array([tree.label])) for tree in stream]
            total = mx.nd.add_n(*losses)
        total.backward()
        trainer.step(TREES_PER_STEP)
    assert batched(dynamic)["batch_sizes"][-1] == 2 * TREES_PER_STEP


def test_results_used_after_the_recording_scope_keep_their_gradients(twins):
    imperative, dynamic = twins
    for step in range(6):
        stream, labels = step_data(step)
        found = []
        for block in (imperative, dynamic):
            with autograd.record():
                outs = [block([tree]) for tree in stream]
            autograd.backward(outs)     # the batch runs here, outside the scope
            found.append([p.grad().asnumpy().copy() for p in block.collect_params().values()])
        for want, have in zip(*found):
            np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-5)
    assert batched(dynamic)["batch_sizes"][-1] == TREES_PER_STEP


def test_calls_that_do_not_record_run_at_once(twins):
    _, dynamic = twins
    for step in range(6):
        stream, _ = step_data(step)
        outs = [dynamic([tree]) for tree in stream]
        assert all(type(out) is mx.nd.NDArray for out in outs)
    assert batched(dynamic)["deferred_calls"] == 0


def test_a_block_changed_between_calls_runs_the_calls_made_before(twins):
    _, dynamic = twins
    (trainer,) = trainers(dynamic)
    for step in range(4):
        run_step(dynamic, trainer, step)
    tree = step_data(60)[0][0]
    with autograd.record():
        out = dynamic([tree])
        dynamic.note = "changed"     # a forward may branch on its block's attributes
        out.wait_to_read()
    assert batched(dynamic)["flushed_by"]["a block changed"] == 1


def test_a_block_batching_calls_is_freed_without_the_cyclic_collector():
    _, dynamic = pair(programs.TreeRNN, check_speed=False, batch_calls=True)
    (trainer,) = trainers(dynamic)
    for step in range(6):
        run_step(dynamic, trainer, step)
    assert batched(dynamic)["batches"] > PROFILED
    gone = weakref.ref(dynamic)
    gc.disable()
    try:
        del dynamic, trainer
        assert gone() is None
    finally:
        gc.enable()


def test_a_loss_made_anew_at_each_step_is_batched_as_the_same_loss(twins):
    imperative, dynamic = twins
    trainer_imperative, trainer_dynamic = trainers(imperative, dynamic)
    for step in range(8):
        outcomes = []
        for block, trainer in ((imperative, trainer_imperative), (dynamic, trainer_dynamic)):
            stream, labels = step_data(step)
            with autograd.record():
                total = mx.nd.add_n(*[gluon.loss.SoftmaxCrossEntropyLoss()(block([tree]), label)
                                      for tree, label in zip(stream, labels)])
            total.backward()
            trainer.step(TREES_PER_STEP)
            outcomes.append(total.asnumpy())
        np.testing.assert_allclose(outcomes[1], outcomes[0], rtol=1e-5, atol=1e-5)
    report = batched(dynamic)
    # Making a loss is no change to the blocks the batch calls: it does not run it.
    assert report["batch_sizes"][-5:] == [2 * TREES_PER_STEP] * 5
    served = report["call_batches"][-1]    # the batch of every call of a step
    assert served["recursion"] >= 3, served


def test_a_batch_gluon_dyn_fails_on_runs_its_calls_as_written(twins, monkeypatch):
    from gluon_dyn.hybridize.call import call_batching
    imperative, dynamic = twins
    trainer_imperative, trainer_dynamic = trainers(imperative, dynamic)
    for step in range(4):
        run_step(imperative, trainer_imperative, step)
        run_step(dynamic, trainer_dynamic, step)

    def broken(self, batch):
        raise RuntimeError("a bug")
    monkeypatch.setattr(call_batching.Batcher, "run", broken)
    with pytest.warns(UserWarning, match="no longer batched.*RuntimeError: a bug"):
        assert_same_results(run_step(imperative, trainer_imperative, 4),
                            run_step(dynamic, trainer_dynamic, 4))
    deferred = batched(dynamic)["deferred_calls"]
    assert_same_results(run_step(imperative, trainer_imperative, 5),
                        run_step(dynamic, trainer_dynamic, 5))
    report = batched(dynamic)
    assert report["gave_up"] == "RuntimeError: a bug" and report["deferred_calls"] == deferred


def test_an_error_of_the_program_is_raised_from_the_batch(twins):
    """A call that raises as written (the loss given labels of the wrong shape)
    raises MXNet's error when its batch runs; gluon_dyn does not take it for its own."""
    _, dynamic = twins
    (trainer,) = trainers(dynamic)
    for step in range(4):
        run_step(dynamic, trainer, step)
    stream, _ = step_data(70)
    with autograd.record():
        losses = [LOSS(dynamic([tree]), mx.nd.zeros((3, 4))) for tree in stream]
        with pytest.raises(mx.base.MXNetError, match="shape"):
            mx.nd.add_n(*losses).wait_to_read()
    assert batched(dynamic)["gave_up"] is None


def test_mxnet_runs_unwrapped_until_a_block_batches_calls(twins):
    """The hooks that run batches first cost nothing in a process that batches no
    calls: they are installed by the first block hybridized with batch_calls=True."""
    hooked = "getattr(mx.ndarray.register._imperative_invoke, '__gluon_dyn_batch_hook__', False)"
    found = subprocess.run([sys.executable, "-c", "import mxnet as mx, gluon_dyn; print(%s)"
                            % hooked], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "False"
    # twins: a block hybridized with batch_calls=True in this process
    assert getattr(mx.ndarray.register._imperative_invoke, "__gluon_dyn_batch_hook__", False)
