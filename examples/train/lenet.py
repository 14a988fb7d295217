"""LeNet on scikit-learn's 8x8 handwritten digits (JANUS's LeNet workload).

The model is a plain Gluon Block whose forward has an `is_training` branch
(dropout while training only). Run it as written or with `--dynamic`
(hybridize(dynamic=True)); in one process or under horovodrun:

    python examples/train/lenet.py --dynamic
    horovodrun --gloo -np 2 -H localhost:2 python examples/train/lenet.py --dynamic
"""
import sys

import mxnet as mx
from mxnet import autograd, gluon

import datasets
import trainkit


class LeNet(gluon.Block):
    def __init__(self, dropout=0.3, **kwargs):
        super().__init__(**kwargs)
        self.dropout = dropout
        with self.name_scope():
            self.conv1 = gluon.nn.Conv2D(16, 3, padding=1, activation="relu")
            self.conv2 = gluon.nn.Conv2D(32, 3, padding=1, activation="relu")
            self.pool = gluon.nn.MaxPool2D(2)
            self.hidden = gluon.nn.Dense(64, activation="relu")
            self.output = gluon.nn.Dense(10)

    def forward(self, x):
        x = self.pool(self.conv1(x))
        x = self.pool(self.conv2(x))
        x = self.hidden(x)
        if autograd.is_training():
            x = mx.nd.Dropout(x, p=self.dropout)
        return self.output(x)


class DigitsTraining(trainkit.Training):
    def __init__(self, args, workers):
        self.args, self.workers = args, workers
        self.train_x, self.train_y, self.test_x, self.test_y = datasets.digits()
        mx.random.seed(args.seed)
        self.net = LeNet(prefix="lenet_")
        self.net.initialize(mx.init.Xavier())
        trainkit.hybridize(self.net, args)
        self.trainer = workers.trainer(self.net.collect_params(), "adam",
                                       {"learning_rate": args.lr})
        self.blocks, self.trainers = {"lenet": self.net}, {"lenet": self.trainer}
        self.loss = gluon.loss.SoftmaxCrossEntropyLoss()

    def step(self, index, rng):
        rows = self.workers.share(datasets.epoch_batch(len(self.train_x), self.args.batch_size,
                                                       index, self.args.seed))
        x, y = trainkit.batch_array(self.train_x[rows]), trainkit.batch_array(self.train_y[rows])
        with autograd.record():
            loss = self.loss(self.net(x), y)
        loss.backward()
        self.trainer.step(len(rows))
        return float(loss.sum().asscalar()), len(rows)

    def predict(self, x):
        return self.net(mx.nd.array(x)).argmax(axis=1)

    def evaluate(self):
        predicted = self.predict(self.test_x).asnumpy()
        return {"test accuracy": float((predicted == self.test_y).mean())}

    def infer(self, rng):
        rows = rng.choice(len(self.test_x), self.args.batch_size, replace=False)
        return self.net(trainkit.batch_array(self.test_x[rows])), len(rows)


NAME, TRAINING = "lenet", DigitsTraining
DEFAULTS = {"steps": 600, "batch_size": 50, "lr": 0.002}


def main(argv=None):
    return trainkit.main(sys.modules[__name__], argv)


if __name__ == "__main__":
    main(sys.argv[1:])
