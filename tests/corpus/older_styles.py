"""Programs written here in the older styles of MXNet's own Gluon examples
(apache/mxnet example/gluon/tree_lstm and example/gluon/lstm_crf), which users'
code still follows:

- a child-sum Tree-LSTM whose forward takes `F` (called with `F=mx.nd`), recurses
  with `self.forward(F, inputs, child)`, reads `inputs[tree.idx]` and enters
  `with inputs.context as ctx:`; the similarity model over two trees, new trees on
  every call;
- a BiLSTM-CRF whose Viterbi decoding assigns into arrays (`vvars[0, i] = 0`),
  reads scalars (`.asscalar()`), concatenates with `nd.concat(a, *tags, dim=0)`, and
  whose training objective is another method of the model (`neg_log_likelihood`).
"""
import random

import mxnet as mx
from mxnet import gluon, nd
from mxnet.gluon import Block, nn, rnn

from .program import Program, integers

# Tree-LSTM ------------------------------------------------------------------------------------


class Tree:
    """A parse tree: the index of its word in the sentence, and its subtrees."""

    def __init__(self, idx):
        self.idx = idx
        self.children = []


def random_tree(words, rng):
    """A tree over word indices 0..words-1, each node a word, drawn from `rng`."""
    nodes = [Tree(index) for index in range(words)]
    for index in range(1, words):
        nodes[rng.randrange(index)].children.append(nodes[index])
    return nodes[0]


class ChildSumLSTMCell(Block):
    def __init__(self, hidden_size, input_size):
        super().__init__()
        with self.name_scope():
            self._hidden_size = hidden_size
            self.i2h_weight = self.params.get("i2h_weight", shape=(4 * hidden_size, input_size))
            self.hs2h_weight = self.params.get("hs2h_weight", shape=(3 * hidden_size, hidden_size))
            self.hc2h_weight = self.params.get("hc2h_weight", shape=(hidden_size, hidden_size))
            self.i2h_bias = self.params.get("i2h_bias", shape=(4 * hidden_size,), init="zeros")
            self.hs2h_bias = self.params.get("hs2h_bias", shape=(3 * hidden_size,), init="zeros")
            self.hc2h_bias = self.params.get("hc2h_bias", shape=(hidden_size,), init="zeros")

    def forward(self, F, inputs, tree):   # pylint: disable=arguments-differ
        children_outputs = [self.forward(F, inputs, child) for child in tree.children]
        if children_outputs:
            _, children_states = zip(*children_outputs)
        else:
            children_states = None
        with inputs.context as ctx:
            return self.node_forward(F, F.expand_dims(inputs[tree.idx], axis=0), children_states,
                                     self.i2h_weight.data(ctx), self.hs2h_weight.data(ctx),
                                     self.hc2h_weight.data(ctx), self.i2h_bias.data(ctx),
                                     self.hs2h_bias.data(ctx), self.hc2h_bias.data(ctx))

    def node_forward(self, F, inputs, children_states, i2h_weight, hs2h_weight, hc2h_weight,
                     i2h_bias, hs2h_bias, hc2h_bias):
        # N: batch, C: hidden state dimensions, K: children
        i2h = F.FullyConnected(data=inputs, weight=i2h_weight, bias=i2h_bias,
                               num_hidden=self._hidden_size * 4)
        i2h_slices = F.split(i2h, num_outputs=4)   # (N, C) * 4: the i, f, u, o gates
        i2h_iuo = F.concat(*[i2h_slices[i] for i in [0, 2, 3]], dim=1)
        if children_states:
            hs = F.add_n(*[state[0] for state in children_states])     # (N, C)
            hc = F.concat(*[F.expand_dims(state[0], axis=1) for state in children_states], dim=1)
            cs = F.concat(*[F.expand_dims(state[1], axis=1) for state in children_states], dim=1)
            f_act = i2h_slices[1] + hc2h_bias + F.dot(hc, hc2h_weight)  # (N, K, C), broadcast
            forget_gates = F.Activation(f_act, act_type="sigmoid")
        else:
            hs = F.zeros_like(i2h_slices[0])   # a leaf: no children's states to sum
        hs2h_iuo = F.FullyConnected(data=hs, weight=hs2h_weight, bias=hs2h_bias,
                                    num_hidden=self._hidden_size * 3)
        i2h_iuo = i2h_iuo + hs2h_iuo
        i_act, u_act, o_act = F.SliceChannel(i2h_iuo, num_outputs=3)
        in_gate = F.Activation(i_act, act_type="sigmoid")
        in_transform = F.Activation(u_act, act_type="tanh")
        out_gate = F.Activation(o_act, act_type="sigmoid")
        next_c = in_gate * in_transform
        if children_states:
            next_c = F.sum(forget_gates * cs, axis=1) + next_c
        next_h = out_gate * F.Activation(next_c, act_type="tanh")
        return next_h, [next_h, next_c]


class Similarity(Block):
    """Distance and angle between the two trees' root states."""

    def __init__(self, sim_hidden_size, rnn_hidden_size, num_classes):
        super().__init__()
        with self.name_scope():
            self.wh = nn.Dense(sim_hidden_size, in_units=2 * rnn_hidden_size)
            self.wp = nn.Dense(num_classes, in_units=sim_hidden_size)

    def forward(self, F, lvec, rvec):   # pylint: disable=arguments-differ
        mult_dist = F.broadcast_mul(lvec, rvec)
        abs_dist = F.abs(F.add(lvec, -rvec))
        vec_dist = F.concat(*[mult_dist, abs_dist], dim=1)
        return F.log_softmax(self.wp(F.sigmoid(self.wh(vec_dist))))


class SimilarityTreeLSTM(Block):
    def __init__(self, sim_hidden_size, rnn_hidden_size, embed_in_size, embed_dim, num_classes):
        super().__init__()
        with self.name_scope():
            self.embed = nn.Embedding(embed_in_size, embed_dim)
            self.childsumtreelstm = ChildSumLSTMCell(rnn_hidden_size, input_size=embed_dim)
            self.similarity = Similarity(sim_hidden_size, rnn_hidden_size, num_classes)

    def forward(self, F, l_inputs, r_inputs, l_tree, r_tree):   # pylint: disable=arguments-differ
        l_inputs = self.embed(l_inputs)
        r_inputs = self.embed(r_inputs)
        lstate = self.childsumtreelstm(F, l_inputs, l_tree)[1][1]
        rstate = self.childsumtreelstm(F, r_inputs, r_tree)[1][1]
        return self.similarity(F, lstate, rstate)


TREE_VOCAB, CLASSES = 30, 5


def sentence_pair(call):
    """Two new sentences and their parse trees (5 to 9 words each) for call `call`."""
    rng = random.Random(500 + call)
    lengths = [rng.randint(5, 9) for _ in range(2)]
    return (mx.nd.array([rng.randrange(TREE_VOCAB) for _ in range(lengths[0])]),
            mx.nd.array([rng.randrange(TREE_VOCAB) for _ in range(lengths[1])]),
            random_tree(lengths[0], rng), random_tree(lengths[1], rng))


def tree_lstm():
    def build():
        model = SimilarityTreeLSTM(16, 12, TREE_VOCAB, 10, CLASSES)
        model.initialize(mx.init.Xavier(magnitude=2.24))
        return model

    def batch(step):
        rng = random.Random(900 + step)
        target = [0.0] * CLASSES   # the example's sparse target distribution of a score
        score = rng.uniform(1, CLASSES)
        low = int(score)
        target[low - 1], target[min(low, CLASSES - 1)] = low + 1 - score, score - low
        return sentence_pair(100 + step) + (mx.nd.array([target]),)

    def loss(model, l_sent, r_sent, l_tree, r_tree, target):
        return gluon.loss.KLDivLoss()(model(mx.nd, l_sent, r_sent, l_tree, r_tree), target).sum()
    return Program(
        name="tree_lstm_similarity", package="written here",
        covers="child-sum Tree-LSTM passing F, recursing with self.forward, reading x[tree.idx]",
        build=build, inputs=sentence_pair,
        infer=lambda model, *pair: model(mx.nd, *pair), batch=batch, loss=loss,
        inference_calls=8)


# BiLSTM-CRF -----------------------------------------------------------------------------------

START_TAG, STOP_TAG = "<START>", "<STOP>"
TAGS = {"B": 0, "I": 1, "O": 2, START_TAG: 3, STOP_TAG: 4}


def to_scalar(x):
    return int(x.asscalar())


def argmax(vec):
    return to_scalar(nd.argmax(vec, axis=1))


def log_sum_exp(vec):
    max_score = nd.max(vec).asscalar()
    return nd.log(nd.sum(nd.exp(vec - max_score))) + max_score


class BiLSTM_CRF(Block):   # pylint: disable=invalid-name
    def __init__(self, vocab_size, tag2idx, embedding_dim, hidden_dim):
        super().__init__()
        with self.name_scope():
            self.embedding_dim = embedding_dim
            self.hidden_dim = hidden_dim
            self.vocab_size = vocab_size
            self.tag2idx = tag2idx
            self.tagset_size = len(tag2idx)
            self.word_embeds = nn.Embedding(vocab_size, embedding_dim)
            self.lstm = rnn.LSTM(hidden_dim // 2, num_layers=1, bidirectional=True)
            self.hidden2tag = nn.Dense(self.tagset_size)
            self.transitions = self.params.get("crf_transition_matrix",
                                               shape=(self.tagset_size, self.tagset_size))
            self.hidden = self.init_hidden()

    def init_hidden(self):
        return [nd.random.normal(shape=(2, 1, self.hidden_dim // 2)),
                nd.random.normal(shape=(2, 1, self.hidden_dim // 2))]

    def _forward_alg(self, feats):
        # The partition function, by the forward algorithm
        alphas = [[-10000.] * self.tagset_size]
        alphas[0][self.tag2idx[START_TAG]] = 0.
        alphas = nd.array(alphas)
        for feat in feats:
            alphas_t = []
            for next_tag in range(self.tagset_size):
                emit_score = feat[next_tag].reshape((1, -1))
                trans_score = self.transitions.data()[next_tag].reshape((1, -1))
                next_tag_var = alphas + trans_score + emit_score
                alphas_t.append(log_sum_exp(next_tag_var))
            alphas = nd.concat(*alphas_t, dim=0).reshape((1, -1))
        terminal_var = alphas + self.transitions.data()[self.tag2idx[STOP_TAG]]
        return log_sum_exp(terminal_var)

    def _get_lstm_features(self, sentence):
        self.hidden = self.init_hidden()
        length = sentence.shape[0]
        embeds = self.word_embeds(sentence).reshape((length, 1, -1))
        lstm_out, self.hidden = self.lstm(embeds, self.hidden)
        lstm_out = lstm_out.reshape((length, self.hidden_dim))
        lstm_feats = self.hidden2tag(lstm_out)
        return nd.split(lstm_feats, num_outputs=length, axis=0, squeeze_axis=True)

    def _score_sentence(self, feats, tags):
        # The score of the given tag sequence
        score = nd.array([0])
        tags = nd.concat(nd.array([self.tag2idx[START_TAG]]), *tags, dim=0)
        for i, feat in enumerate(feats):
            score = score + self.transitions.data()[to_scalar(tags[i + 1]), to_scalar(tags[i])] \
                + feat[to_scalar(tags[i + 1])]
        return score + self.transitions.data()[self.tag2idx[STOP_TAG],
                                               to_scalar(tags[int(tags.shape[0] - 1)])]

    def _viterbi_decode(self, feats):
        backpointers = []
        vvars = nd.full((1, self.tagset_size), -10000.)
        vvars[0, self.tag2idx[START_TAG]] = 0
        for feat in feats:
            bptrs_t = []         # the backpointers of this step
            viterbivars_t = []   # the Viterbi variables of this step
            for next_tag in range(self.tagset_size):
                next_tag_var = vvars + self.transitions.data()[next_tag]
                best_tag_id = argmax(next_tag_var)
                bptrs_t.append(best_tag_id)
                viterbivars_t.append(next_tag_var[0, best_tag_id])
            vvars = (nd.concat(*viterbivars_t, dim=0) + feat).reshape((1, -1))
            backpointers.append(bptrs_t)
        terminal_var = vvars + self.transitions.data()[self.tag2idx[STOP_TAG]]
        best_tag_id = argmax(terminal_var)
        path_score = terminal_var[0, best_tag_id]
        best_path = [best_tag_id]
        for bptrs_t in reversed(backpointers):
            best_tag_id = bptrs_t[best_tag_id]
            best_path.append(best_tag_id)
        start = best_path.pop()
        assert start == self.tag2idx[START_TAG]
        best_path.reverse()
        return path_score, best_path

    def neg_log_likelihood(self, sentence, tags):
        feats = self._get_lstm_features(sentence)
        forward_score = self._forward_alg(feats)
        gold_score = self._score_sentence(feats, tags)
        return forward_score - gold_score

    def forward(self, sentence):   # pylint: disable=arguments-differ
        lstm_feats = self._get_lstm_features(sentence)
        return self._viterbi_decode(lstm_feats)


CRF_VOCAB = 20


def sentence(call):
    length = random.Random(700 + call).randint(4, 8)
    return (integers((length,), call, CRF_VOCAB),)


def bilstm_crf():
    def build():
        model = BiLSTM_CRF(CRF_VOCAB, TAGS, 8, 8)
        model.initialize(mx.init.Xavier())
        return model

    def batch(step):
        words, = sentence(100 + step)
        return words, integers((words.shape[0],), 200 + step, 3)

    def optimizer(model):   # the example's: SGD, learning rate 0.01, weight decay 1e-4
        trainer = gluon.Trainer(model.collect_params(), "sgd", {"learning_rate": 0.01,
                                                                "wd": 1e-4})
        return lambda: trainer.step(1)
    return Program(
        name="bilstm_crf", package="written here",
        covers="CRF: Viterbi assigning into arrays, reading scalars; neg_log_likelihood objective",
        build=build, inputs=sentence, batch=batch,
        loss=lambda model, words, tags: model.neg_log_likelihood(words, tags),
        # Six steps: the objective's runner profiles three, graphs serve the others.
        train_method="neg_log_likelihood", optimizer=optimizer, train_steps=6)


PROGRAMS = [tree_lstm(), bilstm_crf()]
