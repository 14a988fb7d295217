"""Converted Python control flow traced into graphs equals the imperative program.

Each program is a `hybrid_forward` written with plain Python `if`/`while`/`for`,
`and`/`or`/`not` and augmented assignment. The original runs imperatively (the
Python statements see NDArrays); the converted one is hybridized, so the same
statements see Symbols and become cond/while_loop graph nodes.
"""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

from gluon_dyn.hybridize import convert, converted_source
from gluon_dyn.ops import ControlFlowError
from conftest import cached_graph_ops, nd


class Branchy(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(3, in_units=3)

    def hybrid_forward(self, F, x, limit):
        if F.sum(x) > 0:
            y = self.dense(x)
        elif F.sum(x) > -3:
            y = x * 2
        else:
            y = x - 1
        steps = 0
        while steps < limit:          # a tensor predicate; `steps` starts as a Python int
            y = F.tanh(self.dense(y))
            steps += 1
        total = F.zeros((1,))
        for row in x:                 # rows of a tensor
            if F.sum(row) > 0 and not F.max(row) > 5:
                total = total + F.sum(row)
        scaled = y * 2 if F.mean(y) > 0 else y * 3
        return scaled, total


def converted_class(cls):
    return type("Converted" + cls.__name__, (cls,), {"hybrid_forward": convert(cls.hybrid_forward)})


def run(block, inputs):
    inputs = [a.copy() for a in inputs]
    inputs[0].attach_grad()
    # A parameter the imperative run does not reach keeps its previous gradient.
    block.collect_params().zero_grad()
    with autograd.record():
        outputs = block(*inputs)
        loss = sum((o * (i + 1)).sum() for i, o in enumerate(outputs))
    loss.backward()
    return ([o.asnumpy() for o in outputs], inputs[0].grad.asnumpy(),
            {k[len(block.prefix):]: p.grad().asnumpy() for k, p in block.collect_params().items()})


DATA = [np.ones((2, 3)), -0.5 * np.ones((2, 3)), -3 * np.ones((2, 3)),
        np.array([[1, -2, 3.0], [7, 1, 1]])]


def test_tensor_control_flow_matches_imperative_on_every_path():
    mx.random.seed(0)
    original = Branchy()
    original.initialize()
    converted = converted_class(Branchy)()
    converted.initialize()
    for name, param in converted.collect_params().items():
        param.set_data(original.collect_params()[original.prefix + name[len(converted.prefix):]].data())
    converted.hybridize()
    for data in DATA:
        for limit in (0, 1, 3):   # the same graph serves every trip count
            expected = run(original, [nd(data), nd([limit])])
            got = run(converted, [nd(data), nd([limit])])
            for e, g in zip(expected[0], got[0]):
                np.testing.assert_allclose(g.ravel(), np.ravel(e), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(got[1], expected[1], rtol=1e-5, atol=1e-6)
            for key, grad in expected[2].items():
                np.testing.assert_allclose(got[2][key], grad, rtol=1e-5, atol=1e-6)
    ops = cached_graph_ops(converted)
    assert {"_cond", "_while_loop"} <= set(ops)


def test_augmented_assignment_is_rewritten():
    source = converted_source(Branchy.hybrid_forward)
    assert "augmented_assign(steps, 1, '+')" in source
    assert "steps += 1" not in source


def test_augmented_assignment_keeps_in_place_semantics_for_ndarrays():
    def add_twice(a, b):
        alias = a
        a += b
        a += b
        return alias

    x = nd([1.0, 2.0])
    result = convert(add_twice)(x, nd([1.0, 1.0]))
    np.testing.assert_allclose(result.asnumpy(), [3.0, 4.0])
    assert result is x


class OneSided(gluon.HybridBlock):
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0:
            y = x * 2
        return y


def test_variable_assigned_on_one_branch_only_is_named_with_its_line():
    block = converted_class(OneSided)()
    block.hybridize()
    with pytest.raises(ControlFlowError, match=r"test_convert.py:\d+: `y` is assigned only in the "
                                               r"then branch"):
        block(nd([1.0]))


class UnreadOneSided(gluon.HybridBlock):
    def hybrid_forward(self, F, x):
        y = x
        if F.sum(x) > 0:
            y = x * 2
            scratch = x * 3  # noqa: F841 - assigned on one branch only, never read afterwards
        return y


def test_variable_assigned_on_one_branch_but_never_read_is_fine():
    block = converted_class(UnreadOneSided)()
    block.hybridize()
    np.testing.assert_allclose(block(nd([1.0])).asnumpy(), [2.0])
    np.testing.assert_allclose(block(nd([-1.0])).asnumpy(), [-1.0])


class PythonFlag(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        self.double = True

    def hybrid_forward(self, F, x):
        if self.double:          # a Python predicate stays a Python `if`
            x = x * 2
        return x


def test_python_predicates_run_as_python():
    block = converted_class(PythonFlag)()
    np.testing.assert_allclose(block(nd([1.0])).asnumpy(), [2.0])
    block.double = False
    np.testing.assert_allclose(block(nd([1.0])).asnumpy(), [1.0])
