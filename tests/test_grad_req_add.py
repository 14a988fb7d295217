"""Gradient accumulation (grad_req='add') through hybridized control flow.

gluon_dyn's helper operators get no OpReqType from MXNet's extension API; these
tests check that accumulated parameter gradients still match the imperative run.
"""
import numpy as np
from mxnet import autograd, gluon

from gluon_dyn.ops import cond, while_loop
from conftest import make_pair, nd, structural_params


def dense_setup(block):
    block.dense = gluon.nn.Dense(2, in_units=2)
    block.other = gluon.nn.Dense(2, in_units=2)


def loop_then_branch(block, F, x, limit, pred):
    _, (_, h) = while_loop(lambda i, h: i < limit,
                           lambda i, h: ([], [i + 1, F.tanh(block.dense(h))]),
                           [F.zeros((1,)), x], max_iterations=4)
    # `other` is read only by the else branch: the branch not taken must not reset
    # its accumulated gradient.
    return cond(pred, lambda: h * 2, lambda: block.other(h))


def test_accumulated_gradients_match_imperative():
    imperative, hybrid = make_pair(loop_then_branch, setup=dense_setup)
    hybrid.hybridize()
    for block in (imperative, hybrid):
        for param in block.collect_params().values():
            param.grad_req = "add"
            param.zero_grad()
    calls = [(3, 0), (2, 1), (0, 0), (1, 1)]
    for limit, pred in calls:
        for block in (imperative, hybrid):
            with autograd.record():
                out = block(nd([[0.3, -0.2]]), nd([limit]), nd([pred]))
            out.backward()
    got, expected = structural_params(hybrid), structural_params(imperative)
    for name, param in expected.items():
        if param.grad_req == "null":
            continue
        np.testing.assert_allclose(got[name].grad().asnumpy(), param.grad().asnumpy(),
                                   rtol=1e-5, atol=1e-6, err_msg=name)
        assert np.abs(param.grad().asnumpy()).sum() > 0, name
