"""A character-level LSTM language model on the source text of Python's standard
library (JANUS's LSTM workload): the hidden state is kept on the model (`self.state`)
and carried from batch to batch (truncated back-propagation through time).

    python examples/train/lstm_lm.py --dynamic
    horovodrun --gloo -np 2 -H localhost:2 python examples/train/lstm_lm.py --dynamic

Samples are characters. The final metric is the validation perplexity per character, beside the
perplexity of the unigram (character frequency) model of the training text.
"""
import math
import sys

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

import datasets
import trainkit


class LanguageModel(gluon.Block):
    def __init__(self, vocab, embed, hidden, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden
        with self.name_scope():
            self.embed = gluon.nn.Embedding(vocab, embed)
            self.cell = gluon.rnn.LSTMCell(hidden, input_size=embed)
            self.output = gluon.nn.Dense(vocab, in_units=hidden, flatten=False)
        self.state = None

    def forward(self, tokens):                      # tokens: (time, batch)
        if self.state is None:
            zeros = mx.nd.zeros((tokens.shape[1], self.hidden_size))
            self.state = [zeros, zeros]
        state = self.state
        outputs = []
        for t in range(tokens.shape[0]):
            out, state = self.cell(self.embed(tokens[t]), state)
            outputs.append(out)
        self.state = state
        return self.output(mx.nd.stack(*outputs))


def batchify(ids, streams):
    """The text as `streams` parallel rows (time, streams): row b continues where
    the same row of the previous batch stopped."""
    length = len(ids) // streams
    return ids[:length * streams].reshape(streams, length).T


class TextTraining(trainkit.Training):
    def __init__(self, args, workers):
        self.args, self.workers = args, workers
        text = datasets.stdlib_text()[:args.chars] if args.chars else datasets.stdlib_text()
        chars = sorted(set(text))
        ids = np.array([chars.index(c) for c in text], dtype="float32")
        split = int(len(ids) * 0.9)
        self.train_ids, self.valid_ids = ids[:split], ids[split:]
        counts = np.bincount(self.train_ids.astype(int), minlength=len(chars)) + 1.0
        unigram = counts / counts.sum()
        self.unigram_perplexity = float(np.exp(-np.mean(np.log(unigram[self.valid_ids.astype(int)]))))
        self.streams = batchify(self.train_ids, args.batch_size)
        self.batches = (len(self.streams) - 1) // args.bptt
        mx.random.seed(args.seed)
        self.net = LanguageModel(len(chars), args.embed, args.hidden, prefix="lm_")
        self.net.initialize(mx.init.Xavier())
        trainkit.hybridize(self.net, args)
        self.trainer = workers.trainer(self.net.collect_params(), "adam",
                                       {"learning_rate": args.lr, "clip_gradient": 1.0})
        self.blocks, self.trainers = {"lm": self.net}, {"lm": self.trainer}

    @staticmethod
    def token_losses(logits, targets):
        """Cross-entropy of each predicted character, (time, batch)."""
        return -mx.nd.pick(mx.nd.log_softmax(logits), targets)

    def carried(self):
        return {"state%d" % i: s for i, s in enumerate(self.net.state or [])}

    def carry(self, arrays):
        self.net.state = [arrays["state%d" % i] for i in range(len(arrays))] or None

    def step(self, index, rng):
        position = (index % self.batches) * self.args.bptt
        if position == 0:
            self.net.state = None              # a new pass over the text
        window = self.workers.share(self.streams[position:position + self.args.bptt + 1], axis=1)
        inputs, targets = trainkit.batch_array(window[:-1]), trainkit.batch_array(window[1:])
        with autograd.record():
            loss = self.token_losses(self.net(inputs), targets)
        loss.backward()
        self.net.state = [s.detach() for s in self.net.state]
        self.trainer.step(targets.size)
        return float(loss.sum().asscalar()), targets.size

    def evaluate(self):
        saved, self.net.state = self.net.state, None
        streams = batchify(self.valid_ids, 8)
        total, count = 0.0, 0
        for position in range(0, len(streams) - 1, self.args.bptt):
            window = streams[position:position + self.args.bptt + 1]
            loss = self.token_losses(self.net(trainkit.batch_array(window[:-1])),
                                        trainkit.batch_array(window[1:]))
            total += float(loss.sum().asscalar())
            count += loss.size
        self.net.state = saved
        return {"validation perplexity": math.exp(total / count),
                "unigram perplexity": self.unigram_perplexity}

    def infer(self, rng):
        """The next-character distribution over a batch of validation windows."""
        start = rng.randint(len(self.valid_ids) - self.args.bptt * self.args.batch_size)
        window = batchify(self.valid_ids[start:], self.args.batch_size)[:self.args.bptt]
        return mx.nd.softmax(self.net(trainkit.batch_array(window))), window.size


def add_arguments(parser):
    parser.add_argument("--bptt", type=int, default=35, help="time steps per batch")
    parser.add_argument("--embed", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=200)
    parser.add_argument("--chars", type=int, default=0, help="use only the first N characters")


NAME, TRAINING = "lstm_lm", TextTraining
DEFAULTS = {"steps": 1500, "batch_size": 20, "lr": 0.005}


def main(argv=None):
    return trainkit.main(sys.modules[__name__], argv)


if __name__ == "__main__":
    main(sys.argv[1:])
