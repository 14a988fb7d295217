"""PyTorch versions of the training scripts of examples/train (the JANUS workloads of
training_report.py), written as a PyTorch user writes them: the same models, initial
parameter values (the MXNet model's), data stream, batch, loss and optimizer with the
same hyper-parameters.

A builder `build_<script's NAME>(torch, variants, twin)` runs in a PyTorch worker as
whole training steps (harness.TorchProcess(..., step=True)); `twin` is what
training_twins.describe took from the script's Training:
- "values": {block name: {Gluon's structural parameter name: numpy array}},
- "args": the script's command-line settings (a dict),
- "optimizers": {trainer name: training_twins.optimizer_settings},
- "dropout": {block name: rate} of the blocks with a dropout layer,
- "data": the script's training data (numpy arrays; each builder says which).
It returns ({variant: step}, prepare). Each variant has models and optimizer state of
its own: "pytorch eager" runs the modules as written, "torch.compile" the same step
with every model wrapped by torch.compile (its default mode), as a user opts in.
`prepare((index, seed))` does what trainkit's loop does before step `index` (seeds
the random generators) and gives the step's arguments (index, rng); a step trains on
one batch and returns (sum of the per-sample losses, samples), as Training.step does.

Only the PyTorch worker imports this module (its path holds torch); it never imports
MXNet: the scripts' framework-free parts (datasets.py's batches, cartpole_env.py's
episodes) are imported from examples/train.
"""
import math
import os
import sys

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

import torch_twins

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "examples", "train"))
import cartpole_env  # noqa: E402
import datasets  # noqa: E402

COMPILED = {"pytorch eager": False, "torch.compile": True}


def _steps(variants, make_step):
    """{variant: make_step(compiled)}: each variant's own models and optimizer."""
    unknown = sorted(set(variants) - set(COMPILED))
    if unknown:
        raise ValueError("no PyTorch training variant %s (there are: %s)"
                         % (", ".join(unknown), ", ".join(COMPILED)))
    return {name: make_step(COMPILED[name]) for name in variants}


def _prepare(arguments):
    """What trainkit's loop does before a step: the step's seed for every random draw."""
    index, seed = arguments
    torch.manual_seed(seed)
    return index, np.random.RandomState(seed)


def _loaded(module, values, rename=lambda name: name):
    """`module` holding Gluon's parameter `values` (every one, same shapes: loaded
    strictly), each under its torch name `rename(Gluon name)`."""
    module.load_state_dict({rename(name): torch.from_numpy(value.copy())
                            for name, value in values.items()}, strict=True)
    return module


def _runs(module, compiled):
    """What a step calls for `module`: the module, or torch.compile's wrapper of it."""
    return torch.compile(module) if compiled else module


class MXNetAdam:
    """torch.optim.Adam taking MXNet's Adam steps. MXNet adds epsilon to sqrt(v) before
    v's bias correction (w -= lr sqrt(1 - beta2^t) / (1 - beta1^t) m / (sqrt(v) + eps)),
    torch.optim after it; epsilon / sqrt(1 - beta2^t) at step t makes torch's step
    MXNet's. MXNet clips gradients (clip_gradient) inside its update, after adding
    weight decay; here before the update (so not with weight decay)."""

    def __init__(self, parameters, settings):
        if settings["wd"] and settings["clip_gradient"] is not None:
            raise ValueError("MXNet's Adam clips the gradient after adding weight decay; "
                             "torch.optim.Adam adds it after any clipping")
        self.parameters, self.settings, self.steps = list(parameters), settings, 0
        self.optimizer = torch.optim.Adam(
            self.parameters, lr=settings["lr"], betas=(settings["beta1"], settings["beta2"]),
            eps=settings["epsilon"], weight_decay=settings["wd"])

    def zero_grad(self):
        self.optimizer.zero_grad()

    def step(self):
        if self.settings["clip_gradient"] is not None:
            nn.utils.clip_grad_value_(self.parameters, self.settings["clip_gradient"])
        self.steps += 1
        self.optimizer.param_groups[0]["eps"] = self.settings["epsilon"] / math.sqrt(
            1 - self.settings["beta2"] ** self.steps)
        self.optimizer.step()


class MXNetAdaGrad:
    """MXNet's AdaGrad (mxnet.optimizer.AdaGrad on dense gradients): history += g^2,
    w -= lr (g / sqrt(history + eps) + wd w). torch.optim.Adagrad is another rule: it adds
    weight decay to the gradient before the history and epsilon outside the square root
    (an embedding row no word of the batch used, gradient 0, would move by lr there)."""

    def __init__(self, parameters, settings):
        self.parameters, self.settings = list(parameters), settings
        self.history = [torch.zeros_like(p) for p in self.parameters]

    def zero_grad(self):
        for p in self.parameters:
            p.grad = None

    @torch.no_grad()
    def step(self):
        lr, wd, eps = self.settings["lr"], self.settings["wd"], self.settings["float_stable_eps"]
        clip = self.settings["clip_gradient"]
        for p, history in zip(self.parameters, self.history):
            g = p.grad if clip is None else p.grad.clamp(-clip, clip)
            history.addcmul_(g, g)
            p.add_(g / (history + eps).sqrt() + p * wd, alpha=-lr)


OPTIMIZERS = {"adam": MXNetAdam, "adagrad": MXNetAdaGrad}


def _optimizer(module, settings):
    if settings["kind"] not in OPTIMIZERS:
        raise ValueError("no PyTorch twin of MXNet's optimizer %r (there are: %s)"
                         % (settings["kind"], ", ".join(OPTIMIZERS)))
    return OPTIMIZERS[settings["kind"]](module.parameters(), settings)


class LeNet(nn.Module):
    """lenet.LeNet."""

    def __init__(self, dropout):
        super().__init__()
        self.dropout = dropout
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.hidden = nn.Linear(32 * 2 * 2, 64)
        self.output = nn.Linear(64, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.hidden(x.flatten(1)))
        return self.output(F.dropout(x, self.dropout, self.training))


def build_lenet(_torch, variants, twin):
    """lenet.py: data {"x": images (N, 1, 8, 8), "y": labels (N,)}."""
    args, x, y = twin["args"], twin["data"]["x"], twin["data"]["y"]

    def make_step(compiled):
        model = _loaded(LeNet(twin["dropout"]["lenet"]), twin["values"]["lenet"])
        optimizer, forward = _optimizer(model, twin["optimizers"]["lenet"]), _runs(model, compiled)

        def step(index, _rng):
            rows = datasets.epoch_batch(len(x), args["batch_size"], index, args["seed"])
            loss = F.cross_entropy(forward(torch.from_numpy(x[rows])),
                                   torch.from_numpy(y[rows]).long())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            return loss.item() * len(rows), len(rows)
        return step
    return _steps(variants, make_step), _prepare


class LanguageModel(nn.Module):
    """lstm_lm.LanguageModel; the state is an argument and a result."""

    def __init__(self, vocab, embed, hidden):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.cell = nn.LSTMCell(embed, hidden)
        self.output = nn.Linear(hidden, vocab)

    def forward(self, tokens, state):                 # tokens: (time, batch)
        outputs = []
        for t in range(tokens.shape[0]):
            state = self.cell(self.embed(tokens[t]), state)
            outputs.append(state[0])
        return self.output(torch.stack(outputs)), state


# Gluon's LSTMCell parameter names -> torch.nn.LSTMCell's (same gate order: i, f, g, o)
LSTM_NAMES = {"i2h_weight": "weight_ih", "h2h_weight": "weight_hh", "i2h_bias": "bias_ih",
              "h2h_bias": "bias_hh"}


def build_lstm_lm(_torch, variants, twin):
    """lstm_lm.py: data {"streams": the text as (time, streams) character ids,
    "batches": windows per pass}; the state carries on from window to window."""
    args, streams, batches = twin["args"], twin["data"]["streams"], twin["data"]["batches"]
    values = twin["values"]["lm"]
    vocab = values["embed.weight"].shape[0]

    def rename(name):
        block, _, param = name.partition(".")
        return block + "." + LSTM_NAMES.get(param, param)

    def make_step(compiled):
        model = _loaded(LanguageModel(vocab, args["embed"], args["hidden"]), values, rename)
        optimizer, forward = _optimizer(model, twin["optimizers"]["lm"]), _runs(model, compiled)
        carried = {"state": None}

        def step(index, _rng):
            position = (index % batches) * args["bptt"]
            if position == 0:
                carried["state"] = None            # a new pass over the text
            window = torch.from_numpy(streams[position:position + args["bptt"] + 1]).long()
            logits, state = forward(window[:-1], carried["state"])
            targets = window[1:]
            loss = F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            carried["state"] = tuple(s.detach() for s in state)
            optimizer.step()
            return loss.item() * targets.numel(), targets.numel()
        return step
    return _steps(variants, make_step), _prepare


class TreeRNN(nn.Module):
    """tree_sentiment.TreeRNN over a torch_twins.Tree."""

    def __init__(self, vocab, embed, hidden):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.leaf = nn.Linear(embed, hidden)
        self.combine = nn.Linear(2 * hidden, hidden)
        self.output = nn.Linear(hidden, 2)

    def node(self, tree):
        if tree.word is not None:
            return torch.tanh(self.leaf(self.embed(tree.word)))
        left, right = tree.children
        return torch.tanh(self.combine(torch.cat([self.node(left), self.node(right)], dim=1)))

    def forward(self, tree):
        return self.output(self.node(tree))


class TreeLSTM(nn.Module):
    """tree_sentiment.TreeLSTM (binary Tree-LSTM, a forget gate per child)."""

    def __init__(self, vocab, embed, hidden):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.leaf = nn.Linear(embed, 3 * hidden)
        self.gates = nn.Linear(2 * hidden, 5 * hidden)
        self.output = nn.Linear(hidden, 2)

    def node(self, tree):
        if tree.word is not None:
            i, o, u = self.leaf(self.embed(tree.word)).chunk(3, dim=1)
            c = torch.sigmoid(i) * torch.tanh(u)
            return torch.sigmoid(o) * torch.tanh(c), c
        (h_left, c_left), (h_right, c_right) = (self.node(child) for child in tree.children)
        i, o, u, f_left, f_right = self.gates(torch.cat([h_left, h_right], dim=1)).chunk(5, dim=1)
        c = (torch.sigmoid(i) * torch.tanh(u) + torch.sigmoid(f_left) * c_left
             + torch.sigmoid(f_right) * c_right)
        return torch.sigmoid(o) * torch.tanh(c), c

    def forward(self, tree):
        return self.output(self.node(tree)[0])


TREE_CELLS = {"rnn": TreeRNN, "lstm": TreeLSTM}


def build_tree_sentiment(_torch, variants, twin):
    """tree_sentiment.py: data {"trees": torch_twins.Trees (words as (1,) arrays),
    "labels": (N,)}; one call of the model per tree, as the script makes."""
    args, values = twin["args"], twin["values"]["model"]
    trees = [torch_twins.tree_tensors(torch, tree) for tree in twin["data"]["trees"]]
    labels = torch.from_numpy(twin["data"]["labels"]).long()

    def make_step(compiled):
        model = _loaded(TREE_CELLS[args["cell"]](values["embed.weight"].shape[0], args["embed"],
                                                 args["hidden"]), values)
        optimizer, forward = _optimizer(model, twin["optimizers"]["model"]), _runs(model, compiled)

        def step(index, _rng):
            rows = datasets.epoch_batch(len(trees), args["batch_size"], index, args["seed"])
            logits = torch.cat([forward(trees[row]) for row in rows])
            loss = F.cross_entropy(logits, labels[rows])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            return loss.item() * len(rows), len(rows)
        return step
    return _steps(variants, make_step), _prepare


class Policy(nn.Module):
    """cartpole.Policy."""

    def __init__(self, hidden, layers, observations=4):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(hidden if k else observations, hidden)
                                    for k in range(layers))
        self.policy = nn.Linear(hidden, 2)
        self.value = nn.Linear(hidden, 1)

    def forward(self, observations):
        h = observations
        for layer in self.layers:
            h = torch.tanh(layer(h))
        return F.log_softmax(self.policy(h), dim=1), self.value(h)[:, 0]


def build_cartpole(_torch, variants, twin):
    """cartpole.py (REINFORCE with a learned baseline): no data, the episodes of
    cartpole_env played with the policy are the step's batch."""
    args = twin["args"]

    def make_step(compiled):
        model = _loaded(Policy(args["hidden"], args["layers"]), twin["values"]["policy"])
        optimizer, forward = _optimizer(model, twin["optimizers"]["policy"]), _runs(model, compiled)

        def push_right_probabilities(state):
            with torch.no_grad():
                log_probs, _ = forward(torch.from_numpy(state).float())
            return np.exp(log_probs[:, 1].numpy())

        def step(_index, rng):
            envs = cartpole_env.CartPoles(args["batch_size"], rng)
            observations, actions, alive, _ = cartpole_env.play(push_right_probabilities, envs, rng)
            x, chosen, target = (torch.from_numpy(part).float() for part in
                                 cartpole_env.training_batch(observations, actions, alive,
                                                             args["gamma"]))
            log_probs, baseline = forward(x)
            advantage = target - baseline
            losses = (-log_probs.gather(1, chosen.long()[:, None])[:, 0] * advantage.detach()
                      + 0.5 * advantage ** 2)
            optimizer.zero_grad()
            losses.mean().backward()
            optimizer.step()
            return losses.sum().item(), alive.size    # decisions made, as cartpole.py
        return step
    return _steps(variants, make_step), _prepare


class Generator(nn.Module):
    """gan.Generator."""

    def __init__(self, noise, hidden):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(noise, hidden), nn.Linear(hidden, 2 * hidden)])
        self.pixels = nn.Linear(2 * hidden, 64)

    def forward(self, z):
        h = z
        for layer in self.layers:
            h = F.leaky_relu(layer(h), 0.2)
        return torch.tanh(self.pixels(h))


class Discriminator(nn.Module):
    """gan.Discriminator."""

    def __init__(self, hidden, dropout):
        super().__init__()
        self.dropout = dropout
        self.hidden = nn.Linear(64, 2 * hidden)
        self.hidden2 = nn.Linear(2 * hidden, hidden)
        self.score = nn.Linear(hidden, 1)

    def forward(self, images):
        h = F.dropout(F.leaky_relu(self.hidden(images), 0.2), self.dropout, self.training)
        return self.score(F.leaky_relu(self.hidden2(h), 0.2))[:, 0]


def build_gan(_torch, variants, twin):
    """gan.py: data {"real": training images (N, 64) in [-1, 1]}; each step trains the
    discriminator on real and generated images, then the generator."""
    args, real = twin["args"], twin["data"]["real"]
    noise = twin["values"]["generator"]["layer0.weight"].shape[1]

    def make_step(compiled):
        generator = _loaded(Generator(noise, args["hidden"]), twin["values"]["generator"],
                            lambda name: name.replace("layer", "layers.", 1)
                            if name.startswith("layer") else name)
        discriminator = _loaded(Discriminator(args["hidden"], twin["dropout"]["discriminator"]),
                                twin["values"]["discriminator"])
        g_optimizer = _optimizer(generator, twin["optimizers"]["generator"])
        d_optimizer = _optimizer(discriminator, twin["optimizers"]["discriminator"])
        generate, discriminate = _runs(generator, compiled), _runs(discriminator, compiled)

        def step(index, rng):
            rows = datasets.epoch_batch(len(real), args["batch_size"], index, args["seed"])
            n = len(rows)
            ones, zeros = torch.ones(n), torch.zeros(n)
            with torch.no_grad():
                fake = generate(torch.from_numpy(rng.randn(n, noise)).float())
            d_loss = (F.binary_cross_entropy_with_logits(
                discriminate(torch.from_numpy(real[rows])), ones, reduction="none")
                + F.binary_cross_entropy_with_logits(discriminate(fake), zeros, reduction="none"))
            d_optimizer.zero_grad()
            d_loss.mean().backward()
            d_optimizer.step()
            z = torch.from_numpy(rng.randn(n, noise)).float()
            g_loss = F.binary_cross_entropy_with_logits(discriminate(generate(z)), ones,
                                                        reduction="none")
            g_optimizer.zero_grad()
            g_loss.mean().backward()
            g_optimizer.step()
            return (d_loss.detach() + g_loss.detach()).sum().item(), n
        return step
    return _steps(variants, make_step), _prepare
