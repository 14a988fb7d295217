# call 4: output differs: max |diff| 0.42931587 (a failed guard's graph had drawn Dropout's numbers)
# calls: [{'batch': 2, 'scale': -0.5, 'limit': 0, 'flag': True, 'n': 2, 'train': False, 'seed': 948080, 'step': True, 'loss': 'sigmoid bce'}, {'batch': 2, 'scale': 2.0, 'limit': 2, 'flag': True, 'n': 2, 'train': True, 'seed': 846644, 'step': True, 'loss': 'squared sum'}, {'batch': 3, 'scale': 2.0, 'limit': 1, 'flag': False, 'n': 1, 'train': False, 'seed': 585652, 'step': True, 'loss': 'sigmoid bce'}, {'batch': 2, 'scale': 0.5, 'limit': 2, 'flag': True, 'n': 1, 'train': True, 'seed': 879681, 'step': True, 'loss': 'sigmoid bce'}, {'batch': 2, 'scale': -2.0, 'limit': 3, 'flag': True, 'n': 1, 'train': True, 'seed': 500249, 'step': True, 'loss': 'sigmoid bce'}, {'batch': 2, 'scale': 0.5, 'limit': 0, 'flag': False, 'n': 1, 'train': False, 'seed': 685051, 'step': True, 'loss': 'squared sum'}]
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
        if mx.nd.sum(v1) > -1.0:
            if self.flag:
                v1 = self.drop(v1) + v1 * -0.04
            else:
                if mx.nd.sum(v0) > -0.84:
                    pass
                else:
                    with mx.autograd.pause():
                        paused = mx.nd.tanh(self.d1(v2)) * -0.31
                    v0 = v0 + paused
        else:
            pass
        return mx.nd.broadcast_add(v0 + v1 + v2, mx.nd.sum(mx.nd.stack(*acc)))
