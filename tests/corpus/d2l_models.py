"""d2l 1.0.3 programs (`d2l.mxnet`, MXNet's numpy interface): the scratch RNN, LSTM
and GRU language models, the concise GRU one, seq2seq trained and decoded with
`predict_step`, attention decoders, the Transformer and BERT chapters, and the SSD
chapter with d2l's Python NMS (multibox_detection).

d2l 1.0.3 ships the book's saved classes only: LSTMScratch, GRUScratch,
Seq2SeqDecoder, Seq2SeqAttentionDecoder, TransformerDecoder and TinySSD live in the
chapters' pages (d2l_chapters.py holds them, as the book writes them). Sizes are
small, dropout 0."""
import functools

import mxnet as mx
from d2l import mxnet as d2l
from mxnet import gluon

from . import d2l_chapters as chapters
from .program import Program, as_np, integers, uniform

VOCAB, STEPS, BATCH, HIDDEN = 28, 6, 4, 16


def tokens(call, batch=BATCH, steps=STEPS):
    return as_np(integers((batch, steps), call, VOCAB, low=1))


def classifier_loss(model, inputs, labels):
    """d2l's Classifier.loss on the model's output (Module.training_step, less its plot)."""
    return model.loss(model(inputs), labels)


def scratch_optimizer(model):
    """d2l's configure_optimizers: its SGD over the scratch arrays, or a gluon.Trainer."""
    optimizer = model.configure_optimizers()
    if isinstance(optimizer, gluon.Trainer):
        return lambda: optimizer.step(1)
    return lambda: optimizer.step(None)   # d2l.SGD.step takes (and ignores) a batch size


def language_model(name, covers, make_rnn, concise=False):
    def build():
        rnn = make_rnn()
        model = (d2l.RNNLM if concise else d2l.RNNLMScratch)(rnn, vocab_size=VOCAB, lr=0.01)
        if concise:
            model.initialize(mx.init.Xavier(), force_reinit=True)
        return model

    def batch(step):
        sequence = tokens(100 + step, steps=STEPS + 1)
        return sequence[:, :-1], sequence[:, 1:]
    return Program(
        name=name, package="d2l", covers=covers, build=build,
        inputs=lambda call: (tokens(call),), batch=batch, loss=classifier_loss,
        optimizer=scratch_optimizer, numpy_interface=True)


# Sequence to sequence ----------------------------------------------------------------------

def seq2seq(decoder):
    encoder = d2l.Seq2SeqEncoder(VOCAB, 8, HIDDEN, 2)
    return d2l.Seq2Seq(encoder, decoder, tgt_pad=0, lr=0.005)


def gru_seq2seq():
    return seq2seq(chapters.Seq2SeqDecoder(VOCAB, 8, HIDDEN, 2))


def attention_seq2seq():
    return seq2seq(chapters.Seq2SeqAttentionDecoder(VOCAB, 8, HIDDEN, 2))


def transformer_seq2seq():
    encoder = d2l.TransformerEncoder(VOCAB, HIDDEN, 32, 4, 2, 0.0)
    decoder = chapters.TransformerDecoder(VOCAB, HIDDEN, 32, 4, 2, 0.0)
    return d2l.Seq2Seq(encoder, decoder, tgt_pad=0, lr=0.0015)


def translation_batch(call):
    """(source, decoder input, source lengths, label) as d2l's MTFraEng batches."""
    source, target = tokens(call), tokens(50 + call, steps=STEPS + 1)
    lengths = as_np(integers((BATCH,), 90 + call, STEPS + 1, low=2))
    return source, target[:, :-1], lengths, target[:, 1:]


def seq2seq_program(name, covers, make):
    return Program(
        name=name, package="d2l", covers=covers, build=make,
        inputs=lambda call: translation_batch(call)[:3],
        batch=lambda step: (translation_batch(100 + step)[:3], translation_batch(100 + step)[3]),
        loss=lambda model, inputs, label: model.loss(model(*inputs), label),
        optimizer=scratch_optimizer, numpy_interface=True)


def predict_program(name, covers, make):
    """d2l's decoding: Seq2Seq.predict_step, greedy, a fixed number of steps."""
    def infer(model, *batch):
        outputs, _ = model.predict_step(batch, d2l.cpu(), STEPS)
        return outputs
    return Program(
        name=name, package="d2l", covers=covers, build=make, inputs=translation_batch,
        infer=infer, infer_method="predict_step", numpy_interface=True)


# BERT --------------------------------------------------------------------------------------

MASKED = 3


def bert_batch(call, batch=2, length=12):
    """d2l's _WikiTextDataset batch: tokens, segments, lengths, masked positions, their
    weights and tokens, next-sentence labels."""
    return (tokens(call, batch, length), as_np(integers((batch, length), 10 + call, 2)),
            as_np(integers((batch,), 20 + call, length + 1, low=4)),
            as_np(integers((batch, MASKED), 30 + call, 4)), as_np(mx.nd.ones((batch, MASKED))),
            as_np(integers((batch, MASKED), 40 + call, VOCAB)), as_np(integers((batch,), 50 + call, 2)))


def bert():
    def build():
        model = d2l.BERTModel(VOCAB, num_hiddens=HIDDEN, ffn_num_hiddens=32, num_heads=2,
                              num_blks=2, dropout=0.0, max_len=64)
        model.initialize(mx.init.Xavier())
        return model

    def loss(model, *batch):
        """d2l's _get_batch_loss_bert on one shard."""
        _, _, losses = d2l._get_batch_loss_bert(  # pylint: disable=protected-access
            model, gluon.loss.SoftmaxCELoss(), VOCAB, *[[part] for part in batch])
        return losses[0]
    return Program(
        name="d2l_bert", package="d2l", covers="the BERT chapter (pre-training losses)",
        build=build, inputs=lambda call: bert_batch(call)[:4],
        batch=lambda step: bert_batch(100 + step), loss=loss, numpy_interface=True)


# SSD ---------------------------------------------------------------------------------------

def ssd():
    side = 64

    def build():
        model = chapters.SSDDetector(chapters.TinySSD(num_classes=1))
        model.initialize(mx.init.Xavier())
        return model

    def batch(step):
        """An image and its one box (class, corners in [0, 1]), as the banana data set."""
        corners = uniform((1, 1, 2), 400 + step, 0.1, 0.45)
        label = mx.nd.concat(mx.nd.zeros((1, 1, 1)), corners, corners + 0.4, dim=-1)
        return as_np(uniform((1, 3, side, side), 100 + step)), as_np(label)
    return Program(
        name="d2l_ssd", package="d2l",
        covers="the SSD chapter: multibox anchors, targets, Python NMS (multibox_detection)",
        build=build, inputs=lambda call: (as_np(uniform((1, 3, side, side), call)),),
        batch=batch, loss=chapters.ssd_loss, numpy_interface=True, inference_calls=5)


PROGRAMS = [
    language_model("d2l_rnn_scratch_lm", "d2l's scratch RNN language model",
                   lambda: d2l.RNNScratch(num_inputs=VOCAB, num_hiddens=HIDDEN)),
    language_model("d2l_lstm_scratch_lm", "d2l's scratch LSTM language model",
                   lambda: chapters.LSTMScratch(num_inputs=VOCAB, num_hiddens=HIDDEN)),
    language_model("d2l_gru_scratch_lm", "d2l's scratch GRU language model",
                   lambda: chapters.GRUScratch(num_inputs=VOCAB, num_hiddens=HIDDEN)),
    language_model("d2l_gru_lm", "d2l's concise two-layer GRU language model",
                   functools.partial(d2l.GRU, HIDDEN, 2), concise=True),
    seq2seq_program("d2l_seq2seq", "seq2seq (GRU encoder-decoder), training forward",
                    gru_seq2seq),
    predict_program("d2l_seq2seq_predict", "seq2seq decoded with predict_step", gru_seq2seq),
    seq2seq_program("d2l_attention_seq2seq", "attention decoder (Bahdanau), training forward",
                    attention_seq2seq),
    predict_program("d2l_attention_predict", "attention decoder decoded with predict_step",
                    attention_seq2seq),
    seq2seq_program("d2l_transformer", "the Transformer chapter, training forward",
                    transformer_seq2seq),
    predict_program("d2l_transformer_predict",
                    "the Transformer chapter decoded with predict_step (key-value cache)",
                    transformer_seq2seq),
    bert(),
    ssd(),
]
