"""Guard storms: programs whose speculative assumptions fail on every call.

Shared by tests/test_guard_storms.py (results, bounded cache, report) and
benchmarks/guard_storms.py (slowdown against imperative). Each storm is a Block
class plus `arguments(call)`, the inputs of call number `call` (new arrays at
every call), and `prepare_call(call)`, what the user changes on the block before
that call.
"""
import mxnet as mx
from mxnet import gluon

HIDDEN = 32


class _Storm(gluon.Block):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(HIDDEN, in_units=HIDDEN)

    def prepare_call(self, call):
        """Most storms change only their inputs."""


class AlternatingBranch(_Storm):
    """The tensor `if` goes the other way on every call."""

    def forward(self, x):
        h = self.dense(x)
        if mx.nd.sum(x) > 0:
            h = mx.nd.tanh(h)
        else:
            h = mx.nd.relu(h) * 2
        return h

    @staticmethod
    def arguments(call):
        return (mx.nd.ones((2, HIDDEN)) * (0.1 if call % 2 else -0.1),)


class ChangingTripCount(_Storm):
    """The tensor `while` runs a different number of times on every call."""

    def forward(self, x, steps):
        i = mx.nd.zeros((1,))
        h = x
        while mx.nd.sum(i) < mx.nd.sum(steps):
            h = mx.nd.tanh(self.dense(h))
            i = i + 1
        return h

    @staticmethod
    def arguments(call):
        return mx.nd.ones((2, HIDDEN)) * 0.1, mx.nd.array([(call * 7) % 5])


class ChangingShapeRead(_Storm):
    """The batch size changes on every call, and the code reads it."""

    def forward(self, x):
        return self.dense(x) + mx.nd.ones((x.shape[0], HIDDEN)) * x.shape[0]

    @staticmethod
    def arguments(call):
        return (mx.nd.ones(((call * 7) % 23 + 1, HIDDEN)) * 0.1,)


class ChangingShapeUnread(_Storm):
    """The batch size changes on every call; the code never reads it."""

    def forward(self, x):
        h = self.dense(x)
        if mx.nd.sum(h) > 0:
            h = h * 2
        return h

    @staticmethod
    def arguments(call):
        return (mx.nd.ones(((call * 7) % 23 + 1, HIDDEN)) * 0.1,)


class ChangingPythonValue(_Storm):
    """A Python attribute the loop reads takes a new value on every call."""

    def __init__(self):
        super().__init__()
        self.steps = 1

    def forward(self, x):
        h = x
        for _ in range(self.steps):
            h = mx.nd.tanh(self.dense(h))
        return h

    def prepare_call(self, call):
        self.steps = call % 20 + 1

    @staticmethod
    def arguments(call):
        return (mx.nd.ones((2, HIDDEN)) * 0.1,)


STORMS = (AlternatingBranch, ChangingTripCount, ChangingShapeRead, ChangingShapeUnread,
          ChangingPythonValue)
