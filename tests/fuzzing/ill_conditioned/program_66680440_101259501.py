# ill-conditioned at call 5: F.max over rows that became equal in float32; the imperative input gradient jumps by ~4 when the input moves by an ulp
# calls: [{'batch': 3, 'scale': -2.0, 'limit': 1, 'flag': True, 'n': 1, 'train': False, 'seed': 567115}, {'batch': 3, 'scale': -0.5, 'limit': 1, 'flag': True, 'n': 2, 'train': False, 'seed': 533921}, {'batch': 2, 'scale': 2.0, 'limit': 0, 'flag': True, 'n': 2, 'train': True, 'seed': 434172}, {'batch': 3, 'scale': 0.5, 'limit': 2, 'flag': False, 'n': 1, 'train': True, 'seed': 347567}, {'batch': 2, 'scale': -2.0, 'limit': 3, 'flag': True, 'n': 2, 'train': True, 'seed': 726371}, {'batch': 3, 'scale': 0.5, 'limit': 2, 'flag': False, 'n': 2, 'train': False, 'seed': 271342}]
import mxnet as mx
from mxnet import gluon


def helper(F, value, layer):
    if F.sum(value) > 0:
        return F.tanh(layer(value))
    return value * 0.5


def scaled(F, value, c):
    return F.broadcast_add(F.relu(value) * c, F.abs(value))


class Program(gluon.HybridBlock):
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

    def hybrid_forward(self, F, x, limit):
        v0, v1, v2 = x, x * 0.5, F.tanh(x)
        acc = [x]
        if F.sum(v0) > -1.88:
            for row0 in v2:
                v2 = F.broadcast_add(v2, F.sum(row0) * 0.1)
                for row1 in v2:
                    v1 = F.broadcast_add(v1, F.sum(row1) * 0.1)
                    v0 = F.broadcast_sub(v2, F.mean(v1, axis=1, keepdims=True) * -0.11)
                    v1 = F.broadcast_add(F.abs(v1) * 0.05, F.max(v0, axis=0, keepdims=True))
                v2 = F.broadcast_add(F.abs(v0) * 0.57, F.max(v1, axis=0, keepdims=True))
                v2 = F.broadcast_mul(v2, F.softmax(v0, axis=1))
        else:
            mask = F.ones((1, 4))
            mask[0, 2] = -0.85
            mask[:, ::2] += 0.5
            mask[0, [2, 3]] *= 2
            v2 = F.broadcast_mul(v2, mask)
        return F.broadcast_add(v0 + v1 + v2, F.sum(F.stack(*acc)))
