"""Classes of d2l's chapters that the d2l 1.0.3 package does not ship (the book
defines them in its pages, on the package's saved classes): written as the book
writes them, for d2l_models.py. SSDDetector is this corpus's: the SSD chapter's
prediction (multibox_detection, d2l's Python NMS) as a block's inference forward."""
import math

from d2l import mxnet as d2l
from mxnet import autograd, gluon, init, np, npx
from mxnet.gluon import nn, rnn


class LSTMScratch(d2l.Module):
    """Chapter "Long Short-Term Memory (LSTM)", from scratch."""

    def __init__(self, num_inputs, num_hiddens, sigma=0.01):
        super().__init__()
        self.save_hyperparameters()
        init_weight = lambda *shape: d2l.randn(*shape) * sigma   # noqa: E731
        triple = lambda: (init_weight(num_inputs, num_hiddens),  # noqa: E731
                          init_weight(num_hiddens, num_hiddens),
                          d2l.zeros(num_hiddens))
        self.W_xi, self.W_hi, self.b_i = triple()  # Input gate
        self.W_xf, self.W_hf, self.b_f = triple()  # Forget gate
        self.W_xo, self.W_ho, self.b_o = triple()  # Output gate
        self.W_xc, self.W_hc, self.b_c = triple()  # Input node

    def forward(self, inputs, H_C=None):
        if H_C is None:
            H = d2l.zeros((inputs.shape[1], self.num_hiddens), ctx=inputs.ctx)
            C = d2l.zeros((inputs.shape[1], self.num_hiddens), ctx=inputs.ctx)
        else:
            H, C = H_C
        outputs = []
        for X in inputs:
            I = npx.sigmoid(d2l.matmul(X, self.W_xi) + d2l.matmul(H, self.W_hi) + self.b_i)
            F = npx.sigmoid(d2l.matmul(X, self.W_xf) + d2l.matmul(H, self.W_hf) + self.b_f)
            O = npx.sigmoid(d2l.matmul(X, self.W_xo) + d2l.matmul(H, self.W_ho) + self.b_o)
            C_tilde = np.tanh(d2l.matmul(X, self.W_xc) + d2l.matmul(H, self.W_hc) + self.b_c)
            C = F * C + I * C_tilde
            H = O * np.tanh(C)
            outputs.append(H)
        return outputs, (H, C)


class GRUScratch(d2l.Module):
    """Chapter "Gated Recurrent Units (GRU)", from scratch."""

    def __init__(self, num_inputs, num_hiddens, sigma=0.01):
        super().__init__()
        self.save_hyperparameters()
        init_weight = lambda *shape: d2l.randn(*shape) * sigma   # noqa: E731
        triple = lambda: (init_weight(num_inputs, num_hiddens),  # noqa: E731
                          init_weight(num_hiddens, num_hiddens),
                          d2l.zeros(num_hiddens))
        self.W_xz, self.W_hz, self.b_z = triple()  # Update gate
        self.W_xr, self.W_hr, self.b_r = triple()  # Reset gate
        self.W_xh, self.W_hh, self.b_h = triple()  # Candidate hidden state

    def forward(self, inputs, H=None):
        if H is None:
            H = d2l.zeros((inputs.shape[1], self.num_hiddens), ctx=inputs.ctx)
        outputs = []
        for X in inputs:
            Z = npx.sigmoid(d2l.matmul(X, self.W_xz) + d2l.matmul(H, self.W_hz) + self.b_z)
            R = npx.sigmoid(d2l.matmul(X, self.W_xr) + d2l.matmul(H, self.W_hr) + self.b_r)
            H_tilde = np.tanh(d2l.matmul(X, self.W_xh) + d2l.matmul(R * H, self.W_hh) + self.b_h)
            H = Z * H + (1 - Z) * H_tilde
            outputs.append(H)
        return outputs, H


class Seq2SeqDecoder(d2l.Decoder):
    """Chapter "Sequence-to-Sequence Learning": the RNN decoder."""

    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = d2l.GRU(num_hiddens, num_layers, dropout)
        self.dense = nn.Dense(vocab_size, flatten=False)
        self.initialize(init.Xavier())

    def init_state(self, enc_all_outputs, *args):
        return enc_all_outputs

    def forward(self, X, state):
        embs = self.embedding(d2l.transpose(X))
        enc_output, hidden_state = state
        context = enc_output[-1]
        context = np.tile(context, (embs.shape[0], 1, 1))
        embs_and_context = d2l.concat((embs, context), -1)
        outputs, hidden_state = self.rnn(embs_and_context, hidden_state)
        outputs = d2l.swapaxes(self.dense(outputs), 0, 1)
        return outputs, [enc_output, hidden_state]


class Seq2SeqAttentionDecoder(d2l.AttentionDecoder):
    """Chapter "The Bahdanau Attention Mechanism"."""

    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0):
        super().__init__()
        self.attention = d2l.AdditiveAttention(num_hiddens, dropout)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = rnn.GRU(num_hiddens, num_layers, dropout=dropout)
        self.dense = nn.Dense(vocab_size, flatten=False)
        self.initialize(init.Xavier())

    def init_state(self, enc_outputs, enc_valid_lens):
        outputs, hidden_state = enc_outputs
        return (outputs.swapaxes(0, 1), hidden_state, enc_valid_lens)

    def forward(self, X, state):
        enc_outputs, hidden_state, enc_valid_lens = state
        X = self.embedding(X).swapaxes(0, 1)
        outputs, self._attention_weights = [], []
        for x in X:
            query = np.expand_dims(hidden_state[-1], axis=1)
            context = self.attention(query, enc_outputs, enc_outputs, enc_valid_lens)
            x = np.concatenate((context, np.expand_dims(x, axis=1)), axis=-1)
            out, hidden_state = self.rnn(x.swapaxes(0, 1), hidden_state)
            hidden_state = hidden_state[0]
            outputs.append(out)
            self._attention_weights.append(self.attention.attention_weights)
        outputs = self.dense(np.concatenate(outputs, axis=0))
        return outputs.swapaxes(0, 1), [enc_outputs, hidden_state, enc_valid_lens]

    @property
    def attention_weights(self):
        return self._attention_weights


class TransformerDecoderBlock(nn.Block):
    """Chapter "The Transformer Architecture": the i-th decoder block."""

    def __init__(self, num_hiddens, ffn_num_hiddens, num_heads, dropout, i):
        super().__init__()
        self.i = i
        self.attention1 = d2l.MultiHeadAttention(num_hiddens, num_heads, dropout)
        self.addnorm1 = d2l.AddNorm(dropout)
        self.attention2 = d2l.MultiHeadAttention(num_hiddens, num_heads, dropout)
        self.addnorm2 = d2l.AddNorm(dropout)
        self.ffn = d2l.PositionWiseFFN(ffn_num_hiddens, num_hiddens)
        self.addnorm3 = d2l.AddNorm(dropout)

    def forward(self, X, state):
        enc_outputs, enc_valid_lens = state[0], state[1]
        # In prediction the decoder runs step by step: keys and values so far, cached
        if state[2][self.i] is None:
            key_values = X
        else:
            key_values = np.concatenate((state[2][self.i], X), axis=1)
        state[2][self.i] = key_values
        if autograd.is_training():
            batch_size, num_steps, _ = X.shape
            dec_valid_lens = np.tile(np.arange(1, num_steps + 1, ctx=X.ctx), (batch_size, 1))
        else:
            dec_valid_lens = None
        X2 = self.attention1(X, key_values, key_values, dec_valid_lens)
        Y = self.addnorm1(X, X2)
        Y2 = self.attention2(Y, enc_outputs, enc_outputs, enc_valid_lens)
        Z = self.addnorm2(Y, Y2)
        return self.addnorm3(Z, self.ffn(Z)), state


class TransformerDecoder(d2l.AttentionDecoder):
    """Chapter "The Transformer Architecture": the decoder."""

    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout):
        super().__init__()
        self.num_hiddens = num_hiddens
        self.num_blks = num_blks
        self.embedding = nn.Embedding(vocab_size, num_hiddens)
        self.pos_encoding = d2l.PositionalEncoding(num_hiddens, dropout)
        self.blks = nn.Sequential()
        for i in range(num_blks):
            self.blks.add(TransformerDecoderBlock(num_hiddens, ffn_num_hiddens, num_heads,
                                                  dropout, i))
        self.dense = nn.Dense(vocab_size, flatten=False)
        self.initialize()

    def init_state(self, enc_outputs, enc_valid_lens):
        return [enc_outputs, enc_valid_lens, [None] * self.num_blks]

    def forward(self, X, state):
        X = self.pos_encoding(self.embedding(X) * math.sqrt(self.num_hiddens))
        self._attention_weights = [[None] * len(self.blks) for _ in range(2)]
        for i, blk in enumerate(self.blks):
            X, state = blk(X, state)
            # Decoder self-attention weights
            self._attention_weights[0][i] = blk.attention1.attention.attention_weights
            # Encoder-decoder attention weights
            self._attention_weights[1][i] = blk.attention2.attention.attention_weights
        return self.dense(X), state

    @property
    def attention_weights(self):
        return self._attention_weights


# Chapter "Single Shot Multibox Detection" ---------------------------------------------------

def cls_predictor(num_anchors, num_classes):
    return nn.Conv2D(num_anchors * (num_classes + 1), kernel_size=3, padding=1)


def bbox_predictor(num_anchors):
    return nn.Conv2D(num_anchors * 4, kernel_size=3, padding=1)


def flatten_pred(pred):
    return npx.batch_flatten(pred.transpose(0, 2, 3, 1))


def concat_preds(preds):
    return np.concatenate([flatten_pred(p) for p in preds], axis=1)


def down_sample_blk(num_channels):
    blk = nn.Sequential()
    for _ in range(2):
        blk.add(nn.Conv2D(num_channels, kernel_size=3, padding=1),
                nn.BatchNorm(in_channels=num_channels), nn.Activation('relu'))
    blk.add(nn.MaxPool2D(2))
    return blk


def base_net():
    blk = nn.Sequential()
    for num_filters in [16, 32, 64]:
        blk.add(down_sample_blk(num_filters))
    return blk


def get_blk(i):
    if i == 0:
        blk = base_net()
    elif i == 4:
        blk = nn.GlobalMaxPool2D()
    else:
        blk = down_sample_blk(128)
    return blk


def blk_forward(X, blk, size, ratio, cls_predictor, bbox_predictor):
    Y = blk(X)
    anchors = d2l.multibox_prior(Y, sizes=size, ratios=ratio)
    cls_preds = cls_predictor(Y)
    bbox_preds = bbox_predictor(Y)
    return (Y, anchors, cls_preds, bbox_preds)


sizes = [[0.2, 0.272], [0.37, 0.447], [0.54, 0.619], [0.71, 0.79], [0.88, 0.961]]
ratios = [[1, 2, 0.5]] * 5
num_anchors = len(sizes[0]) + len(ratios[0]) - 1


class TinySSD(nn.Block):
    def __init__(self, num_classes, **kwargs):
        super(TinySSD, self).__init__(**kwargs)
        self.num_classes = num_classes
        for i in range(5):
            # Equivalent to the assignment statement `self.blk_i = get_blk(i)`
            setattr(self, f'blk_{i}', get_blk(i))
            setattr(self, f'cls_{i}', cls_predictor(num_anchors, num_classes))
            setattr(self, f'bbox_{i}', bbox_predictor(num_anchors))

    def forward(self, X):
        anchors, cls_preds, bbox_preds = [None] * 5, [None] * 5, [None] * 5
        for i in range(5):
            # Here `getattr(self, 'blk_%d' % i)` accesses `self.blk_i`
            X, anchors[i], cls_preds[i], bbox_preds[i] = blk_forward(
                X, getattr(self, f'blk_{i}'), sizes[i], ratios[i],
                getattr(self, f'cls_{i}'), getattr(self, f'bbox_{i}'))
        anchors = np.concatenate(anchors, axis=1)
        cls_preds = concat_preds(cls_preds)
        cls_preds = cls_preds.reshape(cls_preds.shape[0], -1, self.num_classes + 1)
        bbox_preds = concat_preds(bbox_preds)
        return anchors, cls_preds, bbox_preds


class SSDDetector(nn.Block):
    """TinySSD that predicts as the chapter's `predict` does when not training
    (softmax, multibox_detection's Python NMS, background rows dropped), and gives
    what the chapter's training loop reads when training."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, X):
        anchors, cls_preds, bbox_preds = self.net(X)
        if autograd.is_training():
            return anchors, cls_preds, bbox_preds
        cls_probs = npx.softmax(cls_preds).transpose(0, 2, 1)
        output = d2l.multibox_detection(cls_probs, bbox_preds, anchors)
        idx = [i for i, row in enumerate(output[0]) if row[0] != -1]
        return output[0, idx]


def ssd_loss(model, X, Y):
    """The chapter's training step: multibox_target, then calc_loss."""
    anchors, cls_preds, bbox_preds = model(X)
    bbox_labels, bbox_masks, cls_labels = d2l.multibox_target(anchors, Y)
    cls = gluon.loss.SoftmaxCrossEntropyLoss()(cls_preds, cls_labels)
    bbox = gluon.loss.L1Loss()(bbox_preds * bbox_masks, bbox_labels * bbox_masks)
    return (cls + bbox).mean()
