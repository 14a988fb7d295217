# ill-conditioned at call 2: the output moves by ~5e-5 (over 1e-5) when the input moves by an ulp
# calls: [{'batch': 3, 'scale': -0.5, 'limit': 2, 'flag': False, 'n': 1, 'train': True, 'seed': 571694}, {'batch': 2, 'scale': -2.0, 'limit': 3, 'flag': False, 'n': 1, 'train': True, 'seed': 424370}, {'batch': 3, 'scale': -0.5, 'limit': 3, 'flag': True, 'n': 1, 'train': False, 'seed': 939986}, {'batch': 3, 'scale': 2.0, 'limit': 0, 'flag': True, 'n': 1, 'train': True, 'seed': 16101}, {'batch': 3, 'scale': 0.5, 'limit': 0, 'flag': True, 'n': 2, 'train': False, 'seed': 648459}, {'batch': 2, 'scale': 0.5, 'limit': 1, 'flag': True, 'n': 2, 'train': True, 'seed': 229105}]
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
        for row0 in v1:
            v2 = mx.nd.broadcast_add(v2, mx.nd.sum(row0) * 0.1)
            pass
        for row0 in v2:
            v0 = mx.nd.broadcast_add(v0, mx.nd.sum(row0) * 0.1)
            if self.flag:
                if mx.nd.sum(v2) > -0.66:
                    pass
                else:
                    if mx.nd.sum(v2) > 0.96:
                        continue
                v0 = helper(v2, self.d1)
                ptrs = [int(mx.nd.argmax(mx.nd.sum(v0, axis=0), axis=0).asscalar()), int(mx.nd.argmin(mx.nd.sum(v0, axis=0), axis=0).asscalar())]
                v2 = mx.nd.broadcast_add(v2, v0[0, ptrs[ptrs[0] % 2]] * -0.42)
            else:
                pass
            i1 = mx.nd.zeros((1,))
            while mx.nd.sum(i1) < mx.nd.sum(limit):
                i1 = i1 + 1
                v2 = v2.T.T * 0.44 + v2.copy().astype('float64').astype('float32').reshape(-1, 2).reshape(-1, 4).as_in_context(v2.context)
                v2 = v2.T.T * 0.17 + v2.copy().astype('float64').astype('float32').reshape(-1, 2).reshape(-1, 4).as_in_context(v2.context)
            v0 = mx.nd.sum(mx.nd.stack(v2, v0, axis=0), axis=0) * 0.8
        if float(mx.nd.sum(v1).asscalar()) > -1.34:
            with mx.autograd.pause():
                paused = mx.nd.tanh(self.d0(v1)) * -0.25
            v1 = v1 + paused
        else:
            v2 = helper(v1, self.d1)
        self.count += 1
        v0 = mx.nd.broadcast_add(v0, mx.nd.mean(mx.nd.contrib.boolean_mask(v2, (mx.nd.sum(v2, axis=1) <= mx.nd.min(mx.nd.sum(v2, axis=1)) + 1.74).detach()), axis=0, keepdims=True))
        if mx.nd.sum(v2) > 1.54:
            if float(mx.nd.sum(v1).asscalar()) > -1.01:
                if mx.nd.sum(v0) > 0.63:
                    return mx.nd.broadcast_add(v0, mx.nd.sum(self.state.detach()))
                v1 = helper(v2, self.d0)
                i0 = mx.nd.zeros((1,))
                while mx.nd.sum(i0) < mx.nd.sum(limit):
                    i0 = i0 + 1
                    if mx.nd.sum(v0) > -1.97:
                        return mx.nd.broadcast_add(v0, mx.nd.sum(self.state.detach()))
                    if mx.nd.sum(v0) > 1.43:
                        return mx.nd.broadcast_add(v0, mx.nd.sum(self.state.detach()))
                    v2 = mx.nd.sigmoid(v0) * v1
            else:
                if self.flag:
                    v1 = mx.nd.tanh(self.d0(v2)) + v0 * 0.12
                else:
                    if mx.nd.sum(v1) > -0.79:
                        return mx.nd.broadcast_add(v1, mx.nd.sum(self.state.detach()))
                    v1 = mx.nd.sum(mx.nd.stack(v0, v0, axis=0), axis=0) * 0.91
                    v1 = mx.nd.sum(mx.nd.stack(v0, v0, axis=0), axis=0) * 0.09
                if mx.nd.sum(v0) > 1.18:
                    if mx.nd.sum(v2) > -1.93:
                        return mx.nd.broadcast_add(v2, mx.nd.sum(self.state.detach()))
                else:
                    if mx.nd.sum(v2) > 0.42:
                        return mx.nd.broadcast_add(v2, mx.nd.sum(self.state.detach()))
                    v0 = mx.nd.concat(v1[:, :2], v1[:, 2:] * -0.99, dim=1)
                self.state = mx.nd.broadcast_add(self.state.detach() * 0.5, mx.nd.mean(v1, axis=0, keepdims=True))
            for t0 in range(self.n):
                for t1 in range(self.n):
                    v1 = mx.nd.concat(v2[:, :2], v2[:, 2:] * 0.39, dim=1)
                if self.flag:
                    acc.append(v0)
                else:
                    if mx.nd.sum(v1) > 0.44:
                        break
                    v1 = v1 * -0.26 - mx.nd.relu(v1)
        else:
            v2 = helper(v2, self.d0)
        return mx.nd.broadcast_add(v0 + v1 + v2, mx.nd.sum(mx.nd.stack(*acc)))
