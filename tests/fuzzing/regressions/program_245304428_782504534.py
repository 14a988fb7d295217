# call 2: output differs: max |diff| 0.18922153830309085 (a failed guard's graph had drawn Dropout's numbers)
# calls: [{'batch': 2, 'scale': -0.5, 'limit': 2, 'flag': False, 'n': 1, 'train': False, 'seed': 825324}, {'batch': 2, 'scale': 0.5, 'limit': 0, 'flag': True, 'n': 1, 'train': True, 'seed': 503055}, {'batch': 2, 'scale': 0.5, 'limit': 3, 'flag': False, 'n': 1, 'train': True, 'seed': 633493}, {'batch': 2, 'scale': -2.0, 'limit': 3, 'flag': True, 'n': 1, 'train': True, 'seed': 829764}, {'batch': 3, 'scale': 2.0, 'limit': 1, 'flag': True, 'n': 1, 'train': True, 'seed': 468910}, {'batch': 3, 'scale': 2.0, 'limit': 3, 'flag': True, 'n': 2, 'train': True, 'seed': 332656}]
import mxnet as mx
from mxnet import gluon

DTYPE = "float64"


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
        v0 = self.drop(v0) + v0 * 0.98
        if mx.nd.sum(v1) > -1.57:
            pass
        else:
            pass
        return mx.nd.broadcast_add(v0 + v1 + v2, mx.nd.sum(mx.nd.stack(*acc)))
