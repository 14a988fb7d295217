"""A generative adversarial net on scikit-learn's 8x8 digits (JANUS's AN workload).

Generator and discriminator are plain Gluon Blocks: the generator loops in Python
over its layers, the discriminator has an `is_training` branch (dropout while
training only). Each step trains the discriminator on real and generated images,
then the generator (the non-saturating loss).

    python examples/train/gan.py --dynamic
    horovodrun --gloo -np 2 -H localhost:2 python examples/train/gan.py --dynamic

The final metric is the Frechet distance, in pixel space, between 500 generated
images and the held-out real ones (lower is better), beside that of the untrained
generator and that of the training images themselves.
"""
import sys

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from scipy import linalg

import datasets
import trainkit

NOISE = 16


class Generator(gluon.Block):
    def __init__(self, hidden, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.layers = [gluon.nn.Dense(hidden, in_units=NOISE),
                           gluon.nn.Dense(2 * hidden, in_units=hidden)]
            for k, layer in enumerate(self.layers):
                self.register_child(layer, "layer%d" % k)
            self.pixels = gluon.nn.Dense(64, in_units=2 * hidden)

    def forward(self, z):
        h = z
        for layer in self.layers:
            h = mx.nd.LeakyReLU(layer(h), slope=0.2)
        return mx.nd.tanh(self.pixels(h))


class Discriminator(gluon.Block):
    def __init__(self, hidden, dropout=0.3, **kwargs):
        super().__init__(**kwargs)
        self.dropout = dropout
        with self.name_scope():
            self.hidden = gluon.nn.Dense(2 * hidden, in_units=64)
            self.hidden2 = gluon.nn.Dense(hidden, in_units=2 * hidden)
            self.score = gluon.nn.Dense(1, in_units=hidden)

    def forward(self, images):
        h = mx.nd.LeakyReLU(self.hidden(images), slope=0.2)
        if autograd.is_training():
            h = mx.nd.Dropout(h, p=self.dropout)
        h = mx.nd.LeakyReLU(self.hidden2(h), slope=0.2)
        return self.score(h)[:, 0]


def frechet_distance(a, b):
    """Between Gaussians fitted to two sets of flattened images."""
    mean_a, mean_b = a.mean(axis=0), b.mean(axis=0)
    cov_a, cov_b = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    root = linalg.sqrtm(cov_a.dot(cov_b)).real
    return float(((mean_a - mean_b) ** 2).sum() + np.trace(cov_a + cov_b - 2 * root))


class GanTraining(trainkit.Training):
    def __init__(self, args, workers):
        self.args, self.workers = args, workers
        train_x, _, test_x, _ = datasets.digits()
        self.real = train_x.reshape(len(train_x), 64) * 2 - 1       # pixels in [-1, 1]
        self.test = test_x.reshape(len(test_x), 64) * 2 - 1
        mx.random.seed(args.seed)
        self.generator = Generator(args.hidden, prefix="generator_")
        self.discriminator = Discriminator(args.hidden, prefix="discriminator_")
        for net in (self.generator, self.discriminator):
            net.initialize(mx.init.Xavier())
            trainkit.hybridize(net, args)
        options = {"learning_rate": args.lr, "beta1": 0.5}
        self.g_trainer = workers.trainer(self.generator.collect_params(), "adam", options, "g")
        self.d_trainer = workers.trainer(self.discriminator.collect_params(), "adam", options, "d")
        self.blocks = {"generator": self.generator, "discriminator": self.discriminator}
        self.trainers = {"generator": self.g_trainer, "discriminator": self.d_trainer}
        self.bce = gluon.loss.SigmoidBinaryCrossEntropyLoss()
        self.untrained_distance = self.distance()

    def generate(self, count, rng):
        return self.generator(trainkit.batch_array(rng.randn(count, NOISE)))

    def step(self, index, rng):
        rows = self.workers.share(datasets.epoch_batch(len(self.real), self.args.batch_size,
                                                       index, self.args.seed))
        real, n = trainkit.batch_array(self.real[rows]), len(rows)
        ones, zeros = mx.nd.ones((n,)), mx.nd.zeros((n,))
        fake = self.generate(n, rng)
        with autograd.record():
            d_loss = (self.bce(self.discriminator(real), ones)
                      + self.bce(self.discriminator(fake.detach()), zeros))
        d_loss.backward()
        self.d_trainer.step(n)
        z = trainkit.batch_array(rng.randn(n, NOISE))
        with autograd.record():
            g_loss = self.bce(self.discriminator(self.generator(z)), ones)
        g_loss.backward()
        self.g_trainer.step(n)
        return float((d_loss + g_loss).sum().asscalar()), n

    def distance(self):
        generated = self.generate(500, np.random.RandomState(4321)).asnumpy()
        return frechet_distance(generated, self.test)

    def evaluate(self):
        return {"frechet distance": self.distance(),
                "untrained generator": self.untrained_distance,
                "training images": frechet_distance(self.real, self.test)}

    def infer(self, rng):
        return self.generate(self.args.batch_size, rng), self.args.batch_size


def add_arguments(parser):
    parser.add_argument("--hidden", type=int, default=128)


NAME, TRAINING = "gan", GanTraining
DEFAULTS = {"steps": 1500, "batch_size": 128, "lr": 0.0005}


def main(argv=None):
    return trainkit.main(sys.modules[__name__], argv)


if __name__ == "__main__":
    main(sys.argv[1:])
