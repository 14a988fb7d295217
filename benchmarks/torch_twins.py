"""The PyTorch programs the benchmarks compare with, each computing what a benchmarked
Gluon model computes, with its parameter values.

A builder `build_xxx(torch, *arguments)` runs in a PyTorch worker (harness.TorchProcess,
torch_worker.py); its arguments are picklable: numpy arrays of the Gluon parameters in
their own layouts (Dense/Linear weights are (out, in) in both; LSTM gates are in the
same order), ints and strings. A layer's argument is a tuple of its weight and, if it
has one, its bias (harness.layer_values). It returns `(forward, parameters)`, or
`(forward, parameters, prepare)` when `forward` takes more than the call's arrays as
torch tensors: `prepare` turns the arguments the parent sent (numpy) into forward's.
This module imports neither torch (the builders get it) nor MXNet: recursive_models.py,
in MXNet's process, makes its `Tree`s.
"""
import collections

# A tree of recursive_models.py as the worker receives it: `word` a numpy array (a
# leaf's word index) or None, `children` a list of Trees; torch tensors once prepared.
Tree = collections.namedtuple("Tree", "word children")


def _set_values(torch, module, **values):
    """`module` with its parameters set to `values` (numpy arrays, same layouts)."""
    with torch.no_grad():
        for name, value in values.items():
            getattr(module, name).copy_(torch.from_numpy(value))
    return module


def _linear(torch, weight, bias=None):
    """The torch.nn.Linear computing what a Gluon Dense with these values computes."""
    linear = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None)
    if bias is None:
        return _set_values(torch, linear, weight=weight)
    return _set_values(torch, linear, weight=weight, bias=bias)


def _embedding(torch, weight):
    return _set_values(torch, torch.nn.Embedding(*weight.shape), weight=weight)


def _cell(torch, kind, i2h_weight, h2h_weight, i2h_bias, h2h_bias):
    """The torch.nn cell `kind` ("RNNCell", "GRUCell", "LSTMCell") computing what the
    Gluon cell with these values computes (control_flow_rnn.cell_values)."""
    cell = getattr(torch.nn, kind)(i2h_weight.shape[1], h2h_weight.shape[1])
    return _set_values(torch, cell, weight_ih=i2h_weight, weight_hh=h2h_weight,
                       bias_ih=i2h_bias, bias_hh=h2h_bias)


def build_cell_loop(torch, cell):
    """control_flow_rnn.Loop: the cell over a sequence (steps, batch, features) in a
    Python loop, its per-step outputs stacked."""
    twin = _cell(torch, *cell)

    def forward(seq):
        state = None
        outputs = []
        for t in range(seq.shape[0]):
            state = twin(seq[t], state)
            outputs.append(state[0] if isinstance(state, tuple) else state)
        return torch.stack(outputs)
    return forward, list(twin.parameters())


def build_lstm_head(torch, cell, head):
    """small_lstm.LoopLSTM: an LSTMCell over the sequence, a Linear head on its last output."""
    twin, head = _cell(torch, *cell), _linear(torch, *head)

    def forward(seq):
        state = None
        for t in range(seq.shape[0]):
            state = twin(seq[t], state)
        return head(state[0])
    return forward, list(twin.parameters()) + list(head.parameters())


def build_lenet(torch, layers):
    """tvm_bridge_speed.lenet, inference: `layers` are its two convolutions' and two
    Dense layers' values, in order."""
    nn = torch.nn
    modules = [nn.Conv2d(1, 20, 5), nn.ReLU(), nn.MaxPool2d(2, 2), nn.Conv2d(20, 50, 5),
               nn.ReLU(), nn.MaxPool2d(2, 2), nn.Flatten(), nn.Linear(800, 500), nn.ReLU(),
               nn.Linear(500, 10)]
    weighted = [module for module in modules if list(module.parameters())]
    for module, (weight, bias) in zip(weighted, layers):
        _set_values(torch, module, weight=weight, bias=bias)
    model = nn.Sequential(*modules).eval()
    return model, list(model.parameters())


def build_masked_head(torch, score, head):
    """partitioned.MaskedHead: `score` and `head` are its 3 Dense layers' values each."""
    score = [_linear(torch, *layer) for layer in score]
    head = [_linear(torch, *layer) for layer in head]

    def forward(rows):
        scores = score[2](torch.tanh(score[1](torch.tanh(score[0](rows))))).reshape(-1)
        out = head[2](torch.relu(head[1](torch.relu(head[0](rows[scores.detach() > 0])))))
        if out.sum() > 0:
            out = out * 0.5
        return out
    return forward, [p for layer in score + head for p in layer.parameters()]


def build_reading_rnn(torch, cell, up, down, out, steps):
    """partitioned.ReadingRNN: `steps` cell steps, a host read choosing `up` or `down`,
    `steps` more, then the chosen layer and `out`."""
    cell = _cell(torch, *cell)
    up, down, out = (_linear(torch, *layer) for layer in (up, down, out))

    def forward(seq):
        state = None
        for t in range(steps):
            state = cell(seq[t], state)
        layer = up if state[0].mean().item() > 0 else down
        for t in range(steps, 2 * steps):
            state = cell(seq[t], state)
        return out(layer(state[0]))
    return forward, [p for m in (cell, up, down, out) for p in m.parameters()]


def tree_tensors(torch, tree):
    """`tree` again, its words as int64 tensors."""
    word = None if tree.word is None else torch.from_numpy(tree.word.astype("int64"))
    return Tree(word, [tree_tensors(torch, child) for child in tree.children])


def _tree_tensors(torch):
    """`prepare` for the tree models: the call's trees, words as int64 tensors."""
    def prepare(arguments):
        return ([tree_tensors(torch, tree) for tree in arguments[0]],)
    return prepare


def build_tree_lstm(torch, embed, iou_x, iou_h, f_h, out):
    """recursive_models.TreeLSTM (child-sum Tree-LSTM) over a list of Trees."""
    embed, iou_x, iou_h, f_h, out = (
        _embedding(torch, *embed), _linear(torch, *iou_x), _linear(torch, *iou_h),
        _linear(torch, *f_h), _linear(torch, *out))

    def node(tree):
        if not tree.children:
            i, o, u = iou_x(embed(tree.word)).chunk(3, dim=1)
            c = torch.sigmoid(i) * torch.tanh(u)
            return torch.sigmoid(o) * torch.tanh(c), c
        states = [node(child) for child in tree.children]
        h_sum = sum(h for h, _ in states)
        i, o, u = iou_h(h_sum).chunk(3, dim=1)
        c = torch.sigmoid(i) * torch.tanh(u)
        for h, child_c in states:
            c = c + torch.sigmoid(f_h(h)) * child_c
        return torch.sigmoid(o) * torch.tanh(c), c

    def forward(trees):
        return torch.cat([out(node(tree)[0]) for tree in trees], dim=0)
    parameters = [p for m in (embed, iou_x, iou_h, f_h, out) for p in m.parameters()]
    return forward, parameters, _tree_tensors(torch)


def build_tree_rnn(torch, embed, compose, out):
    """recursive_models.TreeRNN over a list of Trees."""
    embed, compose, out = _embedding(torch, *embed), _linear(torch, *compose), \
        _linear(torch, *out)

    def encode(tree):
        if not tree.children:
            return embed(tree.word)
        left, right = tree.children
        return torch.tanh(compose(torch.cat([encode(left), encode(right)], dim=1)))

    def forward(trees):
        return torch.cat([out(encode(tree)) for tree in trees], dim=0)
    return forward, [p for m in (embed, compose, out) for p in m.parameters()], \
        _tree_tensors(torch)
