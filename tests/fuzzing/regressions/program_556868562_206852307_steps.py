# call 1: output differs: max |diff| 2.2803102 (the probe pass of an outer branch noted its inner branches' reads: their nodes, a Dropout among them, ran at the top level)
# calls: [{'batch': 2, 'scale': 2.0, 'limit': 2, 'flag': True, 'n': 1, 'train': True, 'seed': 457625, 'step': True, 'loss': 'sigmoid bce'}, {'batch': 3, 'scale': -0.5, 'limit': 3, 'flag': True, 'n': 1, 'train': True, 'seed': 302371, 'step': True, 'loss': 'squared sum'}, {'batch': 3, 'scale': -2.0, 'limit': 1, 'flag': False, 'n': 2, 'train': True, 'seed': 537701, 'step': True, 'loss': 'squared sum'}, {'batch': 2, 'scale': 2.0, 'limit': 3, 'flag': True, 'n': 2, 'train': False, 'seed': 77853, 'step': True, 'loss': 'sigmoid bce'}, {'batch': 3, 'scale': 0.5, 'limit': 3, 'flag': False, 'n': 1, 'train': True, 'seed': 460383, 'step': True, 'loss': 'sigmoid bce'}, {'batch': 3, 'scale': 2.0, 'limit': 2, 'flag': False, 'n': 2, 'train': True, 'seed': 646265, 'step': True, 'loss': 'sigmoid bce'}]
import mxnet as mx
from mxnet import gluon

DTYPE = "float32"


def helper(value, layer):
    if mx.nd.sum(value) > 0:
        return mx.nd.tanh(layer(value))
    return value * 0.5


def scaled(F, value, c):
    return F.add(F.relu(value) * c, F.abs(value))


class Program(gluon.Block):
    DTYPE = DTYPE

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.d0 = gluon.nn.Dense(4, in_units=4)
            self.d1 = gluon.nn.Dense(4, in_units=4)
            self.drop = gluon.nn.Dropout(0.5)
        self.flag = True
        self.n = 2
        self.count = 0
        self.total = 0.0
        self.state = mx.nd.zeros((1, 4), dtype=DTYPE)

    def forward(self, x, limit):
        v0, v1, v2 = x, x * 0.5, mx.nd.tanh(x)
        acc = [x]
        if mx.nd.sum(v1) > -1.08:
            for row0 in v2:
                v1 = mx.nd.broadcast_add(v1, mx.nd.sum(row0) * 0.1)
                if mx.nd.sum(v2) > -0.86:
                    v2 = self.drop(v2) + v2 * 0.89
                else:
                    v0 = helper(v2, self.d0)
        else:
            pass
        return mx.nd.broadcast_add(v0 + v1 + v2, mx.nd.sum(mx.nd.stack(*acc)))
