"""A call's MXNet arrays and MXNet's modes, compared with the described call's in one
C call (hybridize/call/call_description.py): equal exactly where the arrays' types,
shapes, dtypes and contexts and the training mode and NumPy shape semantics are; and
autograd's recording told besides."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd

from gluon_dyn.hybridize.call import call_description
from gluon_dyn.hybridize.call.call_description import CallMatch


def described():
    return CallMatch.of((mx.nd.ones((5, 4)), mx.nd.ones((3,), dtype="int64")))


def test_arrays_like_the_described_ones_match_and_recording_is_told():
    match = described()
    assert (match.training, match.np_shape) == (False, False)
    assert match.matches((mx.nd.zeros((5, 4)), mx.nd.zeros((3,), dtype="int64"))) == (True, False)
    with autograd.record(train_mode=False):
        assert match.matches((mx.nd.zeros((5, 4)), mx.nd.zeros((3,), dtype="int64"))) == \
            (True, True)


@pytest.mark.parametrize("arrays", [
    (mx.nd.ones((4, 4)), mx.nd.ones((3,), dtype="int64")),                 # a size
    (mx.nd.ones((5, 4, 1)), mx.nd.ones((3,), dtype="int64")),              # the dimensions
    (mx.nd.ones((5, 4)), mx.nd.ones((3,), dtype="int32")),                 # a dtype
    (mx.nd.ones((5, 4), ctx=mx.cpu(1)), mx.nd.ones((3,), dtype="int64")),  # a context
    (mx.nd.ones((5, 4)).as_in_context(mx.Context("cpu_shared", 0)),
     mx.nd.ones((3,), dtype="int64")),
    (mx.np.ones((5, 4)), mx.nd.ones((3,), dtype="int64")),                 # a type
    (mx.nd.ones((5, 4)),),                                                 # the count
    [mx.nd.ones((5, 4)), mx.nd.ones((3,), dtype="int64")],                 # not arguments
], ids=["size", "dimensions", "dtype", "context", "shared memory", "type", "count", "list"])
def test_arrays_unlike_the_described_ones_do_not_match(arrays):
    assert not described().matches(arrays)[0]


@pytest.mark.parametrize("mode", ["training", "np shape"])
def test_another_mode_does_not_match(mode):
    match = described()
    arrays = (mx.nd.zeros((5, 4)), mx.nd.zeros((3,), dtype="int64"))
    with (autograd.train_mode() if mode == "training" else mx.util.np_shape(True)):
        assert not match.matches(arrays)[0]
    assert match.matches(arrays)[0]


def test_only_mxnet_arrays_are_described():
    assert CallMatch.of((mx.nd.ones((2,)), np.ones((2,)))) is None
    assert CallMatch.of(()) is not None and CallMatch.of(()).matches(())[0]


class _MatchingEverything:
    """A library built against another MXNet's NDArray layout might read the same
    numbers from every array: here, it matches whatever it is given."""

    @staticmethod
    def gluon_dyn_describe_call(handles, count, out, capacity, recording):
        return 2

    @staticmethod
    def gluon_dyn_call_matches(handles, count, expected, size, recording):
        return 1


def test_a_library_that_cannot_tell_arrays_apart_is_not_used():
    assert call_description._describes_rightly(call_description._LIBRARY)
    assert not call_description._describes_rightly(_MatchingEverything())
