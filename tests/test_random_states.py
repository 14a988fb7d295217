"""MXNet's CPU random states saved and put back (gluon_dyn/random_states.py), so that a
call whose graph's guards failed draws its random numbers once, as written."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_dyn  # noqa: F401 - loads the operator library
from gluon_dyn import random_states
from gluon_dyn.hybridize.call.dynamic import report

DRAWS = {
    "Dropout": lambda: mx.nd.Dropout(mx.nd.ones((40, 70)), p=0.5),
    "_random_uniform": lambda: mx.nd.random.uniform(shape=(40, 70)),
    "_random_normal": lambda: mx.nd.random.normal(shape=(40, 70)),
}


@pytest.mark.parametrize("op", random_states.SAMPLING_OPS + ("Dropout",))
def test_the_states_put_back_draw_the_same_numbers_again(op):
    mx.random.seed(5)
    with autograd.train_mode():
        copy = random_states.saved()
        first = DRAWS[op]().asnumpy()
        random_states.restore(copy)
        again = DRAWS[op]().asnumpy()
        then = DRAWS[op]().asnumpy()
    np.testing.assert_array_equal(again, first)
    assert not np.array_equal(then, first)


def test_only_graphs_drawing_from_the_states_are_copied_for():
    x = mx.sym.var("x")
    dropped, sampled = mx.sym.Dropout(x, p=0.5), x + mx.sym.random.uniform(shape=(2,))
    assert random_states.draws(dropped, training=True)
    assert not random_states.draws(dropped, training=False)   # an identity
    assert random_states.draws(sampled, training=False)
    assert not random_states.draws(mx.sym.relu(x), training=True)


def test_a_copy_not_of_the_states_is_refused_naming_it():
    with pytest.raises(mx.MXNetError, match="takes what gluon_dyn_random_states_save gave"):
        getattr(mx.nd, random_states.RESTORE_OP)(mx.nd.zeros((10,), dtype="uint8")).wait_to_read()


class Guarded(gluon.Block):
    """Dropout, then a branch on the data: graphs speculate on it and guard it."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(6, in_units=6)
            self.drop = gluon.nn.Dropout(0.5)

    def forward(self, x):
        h = self.drop(self.dense(x))
        if h.sum() > 0:
            return h * 2
        return h - 1


def twins(cls, **options):
    """An imperative block and one with hybridize(dynamic=True, **options), alike."""
    mx.random.seed(0)
    imperative, dynamic = cls(), cls()
    for block in (imperative, dynamic):
        block.initialize(mx.init.Xavier())
    dynamic.dense.weight.set_data(imperative.dense.weight.data().copy())
    dynamic.hybridize(dynamic=True, profile_calls=1, check_speed=False, **options)
    return imperative, dynamic


def assert_draws_as_written(imperative, dynamic, x, call):
    """A recorded call of both, seeded alike: equal results and the same numbers next."""
    results = []
    for block in (imperative, dynamic):
        mx.random.seed(call)
        with autograd.record():
            out = block(x)
        results.append((out.asnumpy(), mx.nd.random.uniform(shape=(3,)).asnumpy()))
    for expected, got in zip(*results):
        np.testing.assert_array_equal(got, expected)


def test_a_call_whose_guards_failed_draws_as_written():
    imperative, dynamic = twins(Guarded)
    for call, sign in enumerate([1, 1, 1, -1, -1, 1, -1]):
        x = sign * mx.nd.array(np.abs(np.random.RandomState(call).standard_normal((4, 6))))
        for block in (imperative, dynamic):
            block.dense.bias.set_data(sign * mx.nd.ones((6,)))
        assert_draws_as_written(imperative, dynamic, x, call)
    by_kind = report(dynamic)["calls"]["by_kind"]
    assert by_kind["guard_failed"] >= 1 and by_kind["graph"] >= 2, by_kind


class NestedDropout(gluon.Block):
    """A dropout in a branch inside a loop inside a branch (the fuzzer's program
    556868562): each branch on the data becomes a cond node."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(4, in_units=4)
            self.drop = gluon.nn.Dropout(0.5)

    def forward(self, x):
        v0, v2 = x, mx.nd.tanh(x)
        if x.sum() > -1:
            for _ in x:
                if v2.sum() > -0.8:
                    v2 = self.drop(v2) + v2 * 0.9
                else:
                    v0 = mx.nd.tanh(self.dense(v2)) if v2.sum() > 0 else v2 * 0.5
        return v0 + v2


def test_a_dropout_in_a_nested_branch_draws_only_when_its_branch_runs():
    imperative, dynamic = twins(NestedDropout, speculate=False)
    for call in range(6):
        x = mx.nd.array(np.random.RandomState(call).standard_normal((3, 4)) * 0.5)
        assert_draws_as_written(imperative, dynamic, x, call)
    assert report(dynamic)["calls"]["by_kind"]["graph"] == 6    # speculating nothing, none profiled
