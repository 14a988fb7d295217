"""Module-level values read by code that a forward in another module calls
(test_repeated_calls.py): a helper function, a callable object, and a block's forward
that a block of the other module inherits."""
from mxnet import gluon

SCALE = 2.0
OFFSETS = [0.0]
FACTOR = 1.0


def scaled(x):
    return x * SCALE


class Offset:
    def __call__(self, x):
        for offset in OFFSETS:
            x = x + offset
        return x


class Factored(gluon.Block):
    def forward(self, x):
        return x * FACTOR
