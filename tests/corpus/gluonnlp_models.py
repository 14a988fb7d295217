"""GluonNLP 0.10.0 programs, as installed: recurrent language models, sequence
sampling and beam search that stop on end-of-sequence, attention seq2seq and
Transformer NMT (training forward and beam-search translation), BERT pre-training
and classification. Small sizes, dropout 0 (dropout draws differ from call to call).

GluonNLP 0.10 ships its translator and its GNMT model in its scripts, not in the
package: the translator blocks and the RNN attention seq2seq below are written here
in the scripts' style, on the package's samplers, attention cells and NMTModel."""

import gluonnlp as nlp
import mxnet as mx
from gluonnlp.model import attention_cell, sequence_sampler
from gluonnlp.model.seq2seq_encoder_decoder import (Seq2SeqDecoder, Seq2SeqEncoder,
                                                    Seq2SeqOneStepDecoder)
from mxnet import gluon
from mxnet.gluon import rnn

from .program import Program, integers

VOCAB = 40
BOS, EOS = 2, 3     # ids of Vocab's <bos> and <eos> (after <unk>, <pad>)
SEQUENCE, BATCH = 8, 4


def vocabulary():
    """A GluonNLP Vocab of VOCAB tokens (<unk>, <pad>, <bos>, <eos>, then words)."""
    counter = nlp.data.count_tokens(["w%d" % index for index in range(VOCAB - 4)])
    vocab = nlp.Vocab(counter)
    assert (vocab["<bos>"], vocab["<eos>"], len(vocab)) == (BOS, EOS, VOCAB)
    return vocab


def favour(bias, token, by):
    """Raises the output bias of `token`: with random weights a sampler would never
    draw <eos>, and the programs must stop on it."""
    value = bias.data().copy()
    value[token] += by
    bias.set_data(value)


def initialized(block, init=None):
    block.initialize(init if init is not None else mx.init.Xavier())
    return block


def token_batch(call, length=SEQUENCE, batch=BATCH):
    return integers((length, batch), call, VOCAB, low=4)


# Language models ------------------------------------------------------------------------

def awd_lstm():
    return nlp.model.AWDRNN("lstm", VOCAB, 16, 24, 2, tie_weights=False, dropout=0,
                            weight_drop=0, drop_h=0, drop_i=0, drop_e=0)


def standard_lstm():
    return nlp.model.StandardRNN("lstm", VOCAB, 16, 24, 2, dropout=0, tie_weights=False)


def with_begin_state(model, tokens):
    """As GluonNLP's word_language_model.py calls its models."""
    return model(tokens, model.begin_state(batch_size=tokens.shape[1], func=mx.nd.zeros))


def language_model(name, make):
    def batch(step):
        tokens = token_batch(100 + step, SEQUENCE + 1)
        return tokens[:-1], tokens[1:]

    def loss(model, data, target):
        output, _ = with_begin_state(model, data)
        return gluon.loss.SoftmaxCrossEntropyLoss()(
            output.reshape((-3, -1)), target.reshape((-1,))).mean()
    return Program(
        name="gluonnlp_" + name, package="gluonnlp", covers="recurrent language model",
        build=lambda: initialized(make()), inputs=lambda call: (token_batch(call),),
        infer=with_begin_state, batch=batch, loss=loss)


# Samplers: generation that stops on <eos> ------------------------------------------------

class LanguageModelSampler(gluon.Block):
    """Generation from a language model, as GluonNLP's sequence_sampling.py script
    does it: the sampler's decoder is one step of the model."""

    def __init__(self, model, make_sampler):
        super().__init__()
        self.model = model
        self.sampler = make_sampler(ModelStep(self))

    def step(self, inputs, states):
        output, states = self.model(inputs.expand_dims(0), states)
        return output[0], states

    def forward(self, bos):
        return self.sampler(bos, self.model.begin_state(batch_size=bos.shape[0],
                                                          func=mx.nd.zeros))


class ModelStep:
    """A sampler's decoder: the block's step, and the model's state layouts (its
    states' batch axis is 1), which GluonNLP's samplers read from `state_info`."""

    def __init__(self, block):
        self.block = block

    def __call__(self, inputs, states):
        return self.block.step(inputs, states)

    def state_info(self, *args, **kwargs):
        return self.block.model.state_info(*args, **kwargs)


class LogSoftmaxStep(LanguageModelSampler):
    """Beam search takes log-probabilities from its decoder."""

    def step(self, inputs, states):
        output, states = super().step(inputs, states)
        return mx.nd.log_softmax(output), states


def sampler_program(name, covers, block, make_sampler):
    def build():
        model = initialized(standard_lstm())
        with_begin_state(model, token_batch(0))   # Gluon's deferred shapes
        favour(model.decoder[0].bias if isinstance(model.decoder, gluon.nn.HybridSequential)
               else model.decoder.bias, EOS, 3.0)
        return block(model, make_sampler)
    return Program(
        name=name, package="gluonnlp", covers=covers, build=build,
        inputs=lambda call: (mx.nd.full((BATCH,), BOS + call % 2),), inference_calls=8)


def sequence_sampler_program():
    return sampler_program(
        "gluonnlp_sequence_sampler", "sequence sampler stopping on end-of-sequence (random draws)",
        LanguageModelSampler,
        lambda step: sequence_sampler.SequenceSampler(beam_size=3, decoder=step, eos_id=EOS,
                                                      max_length=12))


def beam_search_program():
    return sampler_program(
        "gluonnlp_beam_search", "beam search stopping on end-of-sequence", LogSoftmaxStep,
        lambda step: sequence_sampler.BeamSearchSampler(
            beam_size=3, decoder=step, eos_id=EOS,
            scorer=sequence_sampler.BeamSearchScorer(alpha=1.0, K=5), max_length=12))


# Translation -----------------------------------------------------------------------------

class RNNEncoder(Seq2SeqEncoder):
    """GNMT's encoder, smaller: one bidirectional LSTM layer."""

    def __init__(self, hidden):
        super().__init__()
        with self.name_scope():
            self.rnn = rnn.LSTM(hidden, bidirectional=True, layout="NTC")

    def forward(self, inputs, states=None, valid_length=None):   # pylint: disable=arguments-differ
        return [self.rnn(inputs), valid_length], []


class AttentionDecoderBase(gluon.Block):
    """GNMT's decoder cell, smaller: an LSTM cell fed the previous attention context,
    attending over the encoder's outputs with GluonNLP's MLPAttentionCell."""

    def __init__(self, hidden, **kwargs):
        super().__init__(**kwargs)
        self._hidden = hidden
        with self.name_scope():
            self.cell = rnn.LSTMCell(hidden)
            self.attention = attention_cell.MLPAttentionCell(units=hidden, normalized=False)
            self.output = gluon.nn.Dense(hidden, flatten=False)

    def init_state_from_encoder(self, encoder_outputs, encoder_valid_length=None):
        memory, valid_length = encoder_outputs
        batch = memory.shape[0]
        begin = self.cell.begin_state(batch_size=batch, func=mx.nd.zeros)
        mask = mx.nd.broadcast_lesser(mx.nd.arange(memory.shape[1]).reshape((1, -1)),
                                      valid_length.reshape((-1, 1)))
        return [begin, mx.nd.zeros((batch, memory.shape[2])), memory, mask]

    def step(self, step_input, states):
        cell_states, context, memory, mask = states
        output, cell_states = self.cell(mx.nd.concat(step_input, context, dim=-1), cell_states)
        context, weights = self.attention(output.expand_dims(1), memory, None,
                                          mask.expand_dims(1))
        context = context.reshape((0, -1))
        return self.output(mx.nd.concat(output, context, dim=-1)), \
            [cell_states, context, memory, mask], [weights]


class AttentionDecoder(AttentionDecoderBase, Seq2SeqDecoder):
    """The training decoder: steps over the target in Python, as GNMT's does."""

    def forward(self, step_input, states, valid_length=None):   # pylint: disable=arguments-differ
        outputs, weights = [], []
        for index in range(step_input.shape[1]):
            output, states, attended = self.step(step_input[:, index, :], states)
            outputs.append(output)
            weights.extend(attended)
        outputs = mx.nd.stack(*outputs, axis=1)
        if valid_length is not None:
            outputs = mx.nd.SequenceMask(outputs, sequence_length=valid_length,
                                         use_sequence_length=True, axis=1)
        return outputs, states, [mx.nd.concat(*weights, dim=1)]


class AttentionOneStepDecoder(AttentionDecoderBase, Seq2SeqOneStepDecoder):
    def forward(self, step_input, states):   # pylint: disable=arguments-differ
        return self.step(step_input, states)


def rnn_attention_nmt():
    vocab, hidden = vocabulary(), 24
    decoder = AttentionDecoder(hidden, prefix="decoder_")
    one_step = AttentionOneStepDecoder(hidden, prefix="decoder_", params=decoder.collect_params())
    return nlp.model.translation.NMTModel(
        src_vocab=vocab, tgt_vocab=vocab, encoder=RNNEncoder(hidden // 2), decoder=decoder,
        one_step_ahead_decoder=one_step, embed_size=16, prefix="gnmt_")


def transformer_nmt():
    vocab = vocabulary()
    encoder, decoder, one_step = nlp.model.transformer.get_transformer_encoder_decoder(
        num_layers=2, num_heads=4, units=32, hidden_size=64, dropout=0.0,
        max_src_length=20, max_tgt_length=20)
    return nlp.model.translation.NMTModel(
        src_vocab=vocab, tgt_vocab=vocab, encoder=encoder, decoder=decoder,
        one_step_ahead_decoder=one_step, embed_size=32, share_embed=True, tie_weights=True,
        prefix="transformer_")


def sentence_pairs(call, batch=BATCH):
    """(source, target (<bos> ... <eos>), source lengths, target lengths) of `call`."""
    source = integers((batch, SEQUENCE), call, VOCAB, low=4)
    target = integers((batch, SEQUENCE + 1), 50 + call, VOCAB, low=4)
    target[:, 0] = BOS
    lengths = integers((batch,), 90 + call, SEQUENCE + 1, low=3)
    target_lengths = integers((batch,), 95 + call, SEQUENCE + 2, low=3)
    return source, target, lengths, target_lengths


def teacher_forced(model, source, target, lengths, target_lengths):
    """As GluonNLP's train_transformer.py and train_gnmt.py call the model."""
    return model(source, target[:, :-1], lengths, target_lengths - 1)


def nmt_loss(model, source, target, lengths, target_lengths):
    output, _ = teacher_forced(model, source, target, lengths, target_lengths)
    return nlp.loss.MaskedSoftmaxCELoss()(output, target[:, 1:], target_lengths - 1).mean()


def nmt_program(name, covers, make, init):
    return Program(
        name=name, package="gluonnlp", covers=covers,
        build=lambda: initialized(make(), init), inputs=sentence_pairs, infer=teacher_forced,
        batch=lambda step: sentence_pairs(100 + step), loss=nmt_loss)


class BeamSearchTranslator(gluon.Block):
    """GluonNLP's scripts/nmt/translation.py BeamSearchTranslator, as a block: encode,
    then beam search over the model's decode_step until every beam reached <eos>."""

    def __init__(self, model, beam_size=3, max_length=10):
        super().__init__()
        self.model = model
        self.sampler = sequence_sampler.BeamSearchSampler(
            beam_size=beam_size, decoder=self.decode_log_probabilities, eos_id=EOS,
            scorer=sequence_sampler.BeamSearchScorer(alpha=1.0, K=5), max_length=max_length)

    def decode_log_probabilities(self, step_input, states):
        output, states, _ = self.model.decode_step(step_input, states)
        return mx.nd.log_softmax(output), states

    def forward(self, source, lengths):
        encoded, _ = self.model.encode(source, valid_length=lengths)
        states = self.model.decoder.init_state_from_encoder(encoded, lengths)
        return self.sampler(mx.nd.full((source.shape[0],), BOS), states)


def translator_program(name, covers, make, init):
    def build():
        model = initialized(make(), init)
        teacher_forced(model, *sentence_pairs(0))   # Gluon's deferred shapes
        favour(model.tgt_proj.bias, EOS, 3.0)
        return BeamSearchTranslator(model)
    return Program(name=name, package="gluonnlp", covers=covers, build=build,
                   inputs=lambda call: (sentence_pairs(call)[0], sentence_pairs(call)[2]))


# BERT ----------------------------------------------------------------------------------------

def bert(**uses):
    encoder = nlp.model.BERTEncoder(num_layers=2, units=32, hidden_size=64, max_length=32,
                                    num_heads=4, dropout=0.0)
    return nlp.model.BERTModel(encoder, vocab_size=VOCAB, token_type_vocab_size=2, units=32,
                               embed_size=32, **uses)


MASKED = 3


def bert_inputs(call, batch=2, length=12):
    tokens = integers((batch, length), call, VOCAB, low=4)
    types = integers((batch, length), 10 + call, 2)
    lengths = integers((batch,), 20 + call, length + 1, low=4)
    positions = integers((batch, MASKED), 30 + call, 4)
    return tokens, types, lengths, positions


def bert_pretraining():
    def batch(step):
        return bert_inputs(100 + step) + (integers((2, MASKED), 40 + step, VOCAB),
                                          integers((2,), 50 + step, 2))

    def loss(model, tokens, types, lengths, positions, masked_ids, next_sentence):
        """The masked-LM and next-sentence losses of GluonNLP's run_pretraining.py."""
        _, _, nsp, mlm = model(tokens, types, lengths, positions)
        ce = gluon.loss.SoftmaxCELoss()
        return ce(mlm.reshape((-3, -1)), masked_ids.reshape((-1,))).mean() + \
            ce(nsp, next_sentence).mean()
    return Program(
        name="gluonnlp_bert_pretraining", package="gluonnlp", covers="BERT (pre-training heads)",
        build=lambda: initialized(bert(), mx.init.Normal(0.02)), inputs=bert_inputs,
        batch=batch, loss=loss)


def bert_classifier():
    def build():
        return initialized(nlp.model.BERTClassifier(
            bert(use_pooler=True, use_decoder=False, use_classifier=False), num_classes=3,
            dropout=0.0), mx.init.Normal(0.02))

    def batch(step):
        return bert_inputs(100 + step)[:3] + (integers((2,), 50 + step, 3),)

    def loss(model, tokens, types, lengths, label):
        return gluon.loss.SoftmaxCELoss()(model(tokens, types, lengths), label).mean()
    return Program(
        name="gluonnlp_bert_classifier", package="gluonnlp", covers="BERT (fine-tuning)",
        build=build, inputs=lambda call: bert_inputs(call)[:3], batch=batch, loss=loss)


PROGRAMS = [
    language_model("awd_lstm_lm", awd_lstm),
    language_model("standard_lstm_lm", standard_lstm),
    sequence_sampler_program(),
    beam_search_program(),
    nmt_program("gluonnlp_rnn_attention_nmt", "attention seq2seq (GNMT-style, MLP attention)",
                rnn_attention_nmt, mx.init.Xavier()),
    translator_program("gluonnlp_rnn_attention_beam_search",
                       "attention seq2seq translated by beam search", rnn_attention_nmt,
                       mx.init.Xavier()),
    nmt_program("gluonnlp_transformer_nmt", "Transformer NMT (training forward)",
                transformer_nmt, mx.init.Xavier(magnitude=3.0)),
    translator_program("gluonnlp_transformer_beam_search",
                       "Transformer NMT translated by beam search", transformer_nmt,
                       mx.init.Xavier(magnitude=3.0)),
    bert_pretraining(),
    bert_classifier(),
]
