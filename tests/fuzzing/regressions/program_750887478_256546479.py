# None
# calls: [{'batch': 2, 'scale': 2.0, 'limit': 3, 'flag': True, 'n': 1, 'train': True, 'seed': 785085}, {'batch': 3, 'scale': -2.0, 'limit': 3, 'flag': False, 'n': 1, 'train': False, 'seed': 532736}, {'batch': 2, 'scale': -0.5, 'limit': 0, 'flag': False, 'n': 2, 'train': True, 'seed': 557840}, {'batch': 3, 'scale': -2.0, 'limit': 0, 'flag': True, 'n': 1, 'train': True, 'seed': 992787}, {'batch': 2, 'scale': 0.5, 'limit': 3, 'flag': False, 'n': 1, 'train': True, 'seed': 960833}, {'batch': 2, 'scale': 0.5, 'limit': 1, 'flag': True, 'n': 1, 'train': False, 'seed': 217533}]
import mxnet as mx
from mxnet import gluon


def helper(value, layer):
    if mx.nd.sum(value) > 0:
        return mx.nd.tanh(layer(value))
    return value * 0.5


def scaled(F, value, c):
    return F.add(F.relu(value) * c, F.abs(value))


class Program(gluon.Block):
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
        self.state = mx.nd.zeros((1, 4))

    def forward(self, x, limit):
        v0, v1, v2 = x, x * 0.5, mx.nd.tanh(x)
        acc = [x]
        if mx.nd.sum(v0) > -0.4:
            pass
        else:
            i0 = mx.nd.zeros((1,))
            while mx.nd.sum(i0) < mx.nd.sum(limit):
                i0 = i0 + 1
                pass
        if self.flag:
            mask = mx.nd.ones((1, 4))
            mask[0, 2] = -0.99
            mask[:, ::2] += 0.5
            mask[0, [2, 3]] *= 2
            v2 = mx.nd.broadcast_mul(v2, mask)
        else:
            i0 = mx.nd.zeros((1,))
            while mx.nd.sum(i0) < mx.nd.sum(limit):
                i0 = i0 + 1
                pass
        return mx.nd.broadcast_add(v0 + v1 + v2, mx.nd.sum(mx.nd.stack(*acc)))
