"""REINFORCE with a learned baseline on CartPole (JANUS's A3C/CartPole workload,
20 environments), with the cart-pole physics written out below (the classic
control task: keep a pole upright by pushing the cart left or right; +1 per step,
at most 500 steps; the pole falls past 12 degrees or the cart leaves +-2.4).

The policy is a plain Gluon Block (a Python loop over its hidden layers, a
policy and a value head). A step of training plays one episode in each of the
environments, then takes one gradient step on every decision made.

    python examples/train/cartpole.py --dynamic
    horovodrun --gloo -np 2 -H localhost:2 python examples/train/cartpole.py --dynamic

Samples are decisions (environment steps). The final metric is the mean return
of 20 evaluation episodes taking the policy's most likely action.
"""
import sys

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

import trainkit

MAX_STEPS = 500
GRAVITY, CART_MASS, POLE_MASS, POLE_HALF_LENGTH, FORCE, DT = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02


class CartPoles:
    """`count` independent cart-poles, stepped together (state: x, x', theta, theta')."""

    def __init__(self, count, rng):
        self.state = rng.uniform(-0.05, 0.05, size=(count, 4))

    def step(self, push_right):
        x, x_dot, theta, theta_dot = self.state.T
        force = np.where(push_right, FORCE, -FORCE)
        cos, sin = np.cos(theta), np.sin(theta)
        total_mass = CART_MASS + POLE_MASS
        temp = (force + POLE_MASS * POLE_HALF_LENGTH * theta_dot ** 2 * sin) / total_mass
        theta_acc = (GRAVITY * sin - cos * temp) / (
            POLE_HALF_LENGTH * (4.0 / 3.0 - POLE_MASS * cos ** 2 / total_mass))
        x_acc = temp - POLE_MASS * POLE_HALF_LENGTH * theta_acc * cos / total_mass
        self.state = np.stack([x + DT * x_dot, x_dot + DT * x_acc,
                               theta + DT * theta_dot, theta_dot + DT * theta_acc], axis=1)

    def fallen(self):
        return (np.abs(self.state[:, 0]) > 2.4) | (np.abs(self.state[:, 2]) > 12 * np.pi / 180)


class Policy(gluon.Block):
    def __init__(self, hidden, layers, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.layers = gluon.nn.HybridSequential()
            for _ in range(layers):
                self.layers.add(gluon.nn.Dense(hidden, activation="tanh"))
            self.policy = gluon.nn.Dense(2)
            self.value = gluon.nn.Dense(1)

    def forward(self, observations):
        h = observations
        for layer in self.layers:
            h = layer(h)
        return mx.nd.log_softmax(self.policy(h)), self.value(h)[:, 0]


def play(net, envs, rng, greedy=False):
    """Plays until every environment's pole fell (or MAX_STEPS): the observations,
    actions and rewards of each environment, and each one's return."""
    observations, actions, alive = [], [], []
    running = np.ones(len(envs.state), dtype=bool)
    for _ in range(MAX_STEPS):
        log_probs, _ = net(mx.nd.array(envs.state))
        probs = np.exp(log_probs.asnumpy())
        right = probs[:, 1] > 0.5 if greedy else rng.rand(len(probs)) < probs[:, 1]
        observations.append(envs.state)
        actions.append(right)
        alive.append(running.copy())
        envs.step(right)
        running &= ~envs.fallen()
        if not running.any():
            break
    alive = np.array(alive)                     # (time, env): the env had not fallen yet
    return np.array(observations), np.array(actions), alive, alive.sum(axis=0)


def discounted(alive, gamma):
    """Each decision's discounted return (reward 1 per step the pole stayed up)."""
    returns = np.zeros(alive.shape)
    running = np.zeros(alive.shape[1])
    for t in reversed(range(len(alive))):
        running = alive[t] * (1.0 + gamma * running)
        returns[t] = running
    return returns


class CartPoleTraining(trainkit.Training):
    def __init__(self, args, workers):
        self.args, self.workers = args, workers
        if args.batch_size % workers.size:
            raise ValueError("--batch-size (environments) must split over the workers")
        mx.random.seed(args.seed)
        self.net = Policy(args.hidden, args.layers, prefix="policy_")
        self.net.initialize(mx.init.Xavier())
        if args.dynamic:
            self.net.hybridize(dynamic=True, backend=args.backend)
        self.trainer = workers.trainer(self.net.collect_params(), "adam",
                                       {"learning_rate": args.lr})
        self.blocks, self.trainers = {"policy": self.net}, {"policy": self.trainer}
        self.returns = []

    def step(self, index, rng):
        envs = CartPoles(self.args.batch_size // self.workers.size, rng)
        observations, actions, alive, returns = play(self.net, envs, rng)
        self.returns.extend(returns.tolist())
        taken = alive.reshape(-1)
        values = discounted(alive, self.args.gamma).reshape(-1)[taken]
        x = mx.nd.array(observations.reshape(-1, 4)[taken])
        chosen = mx.nd.array(actions.reshape(-1)[taken].astype("float32"))
        target = mx.nd.array(values / 100.0)
        with autograd.record():
            log_probs, baseline = self.net(x)
            advantage = target - baseline
            loss = (-mx.nd.pick(log_probs, chosen) * advantage.detach()
                    + 0.5 * advantage ** 2)
        loss.backward()
        self.trainer.step(len(values))
        return float(loss.sum().asscalar()), len(values)

    def evaluate(self):
        episodes = 20
        _, _, _, returns = play(self.net, CartPoles(episodes, np.random.RandomState(12345)),
                                None, greedy=True)
        recent = self.returns[-episodes:]
        return {"greedy mean return": float(returns.mean()),
                "training mean return (last %d episodes)" % len(recent):
                    float(np.mean(recent)) if recent else 0.0}

    def infer(self, rng):
        """One decision for each of --batch-size cart-poles."""
        envs = CartPoles(self.args.batch_size, rng)
        return self.net(mx.nd.array(envs.state))[0].exp(), self.args.batch_size


def add_arguments(parser):
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--gamma", type=float, default=0.99)


NAME, TRAINING = "cartpole", CartPoleTraining
DEFAULTS = {"steps": 150, "batch_size": 20, "lr": 0.01}


def main(argv=None):
    return trainkit.main(sys.modules[__name__], argv)


if __name__ == "__main__":
    main(sys.argv[1:])
