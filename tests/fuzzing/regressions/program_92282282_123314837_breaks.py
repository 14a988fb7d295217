# None
# calls: [{'batch': 3, 'scale': 2.0, 'limit': 2, 'flag': False, 'n': 1, 'train': True, 'seed': 537510}, {'batch': 3, 'scale': -0.5, 'limit': 0, 'flag': False, 'n': 1, 'train': True, 'seed': 40908}, {'batch': 3, 'scale': 0.5, 'limit': 3, 'flag': True, 'n': 1, 'train': True, 'seed': 789144}, {'batch': 3, 'scale': 0.5, 'limit': 3, 'flag': True, 'n': 2, 'train': False, 'seed': 922646}, {'batch': 3, 'scale': 0.5, 'limit': 3, 'flag': True, 'n': 1, 'train': True, 'seed': 38172}, {'batch': 3, 'scale': 2.0, 'limit': 0, 'flag': False, 'n': 1, 'train': True, 'seed': 7731}]
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
        v1 = mx.nd.broadcast_add(v1, mx.nd.mean(mx.nd.contrib.boolean_mask(v0, (mx.nd.sum(v0, axis=1) <= mx.nd.min(mx.nd.sum(v0, axis=1)) + 0.41).detach()), axis=0, keepdims=True))
        if mx.nd.sum(v2) > 1.99:
            ptrs = [int(mx.nd.argmax(mx.nd.sum(v0, axis=0), axis=0).asscalar()), int(mx.nd.argmin(mx.nd.sum(v0, axis=0), axis=0).asscalar())]
            v0 = mx.nd.broadcast_add(v0, v0[0, ptrs[ptrs[0] % 2]] * -0.26)
        else:
            pass
        ptrs = [int(mx.nd.argmax(mx.nd.sum(v1, axis=0), axis=0).asscalar()), int(mx.nd.argmin(mx.nd.sum(v1, axis=0), axis=0).asscalar())]
        v1 = mx.nd.broadcast_add(v1, v1[0, ptrs[ptrs[0] % 2]] * 0.78)
        return mx.nd.broadcast_add(v0 + v1 + v2, mx.nd.sum(mx.nd.stack(*acc)))
