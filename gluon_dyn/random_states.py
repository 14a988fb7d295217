"""MXNet's CPU random states saved and put back (src/operator/control_flow/random_states_op.cc).

A speculative graph whose guards fail is run again as Python (runner.py). Where
the graph draws random numbers (Dropout while training, MXNet's sampling
operators) from MXNet's parallel random states, its run advanced them: the
states are put back before Python runs, so the call draws its numbers once, the
same as the program as written. A copy is 5 MB (1,024 Mersenne twisters), about
0.2 ms, made only for such graphs with guards.
"""
import mxnet as mx
from mxnet import autograd

from . import graph_json
from .native import DROPOUT_OP

SAVE_OP = "gluon_dyn_random_states_save"
RESTORE_OP = "gluon_dyn_random_states_restore"
# Operators drawing from the parallel random states on the CPU (tests/test_random_states.py).
SAMPLING_OPS = ("_random_uniform", "_random_normal")
DROPOUT_OPS = ("Dropout", DROPOUT_OP)
_anchor = []     # the array `saved` passes (an operator needs an input): made once


def draws(symbol, training):
    """Whether runs of `symbol` in autograd's `training` mode draw from the states."""
    return graph_json.holds_ops(symbol, SAMPLING_OPS + (DROPOUT_OPS if training else ()))


def saved():
    """A copy of the CPU's random states, once the operators queued before it ran."""
    with autograd.pause():
        if not _anchor:
            _anchor.append(mx.nd.zeros((1,), dtype="uint8"))
        return getattr(mx.nd, SAVE_OP)(_anchor[0])


def restore(copy):
    """Puts the states `saved` gave back, after the operators queued before it."""
    with autograd.pause():
        getattr(mx.nd, RESTORE_OP)(copy)
