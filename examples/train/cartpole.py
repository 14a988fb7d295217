"""REINFORCE with a learned baseline on CartPole (JANUS's A3C/CartPole workload,
20 environments), with the cart-pole physics written out in cartpole_env.py (the
classic control task: keep a pole upright by pushing the cart left or right; +1 per
step, at most 500 steps; the pole falls past 12 degrees or the cart leaves +-2.4).

The policy is a plain Gluon Block (a Python loop over its hidden layers, a
policy and a value head). A step of training plays one episode in each of the
environments, then takes one gradient step on every decision made.

    python examples/train/cartpole.py --dynamic
    horovodrun --gloo -np 2 -H localhost:2 python examples/train/cartpole.py --dynamic

Samples are the decisions the policy makes, one per environment per step of the
episodes' loop, its pole standing or fallen (it decides for all environments at
once): a step's work. The decisions that train, those of standing poles, depend on
how long each run's policy keeps them up, which differs between runs from the first
rounding that differs. The final metric is the mean return of 20 evaluation
episodes taking the policy's most likely action.
"""
import sys

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

import cartpole_env
import trainkit
from cartpole_env import CartPoles, training_batch


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
    """cartpole_env.play deciding with the policy `net`."""
    return cartpole_env.play(lambda state: np.exp(net(trainkit.batch_array(state))[0].asnumpy()[:, 1]),
                             envs, rng, greedy)


class CartPoleTraining(trainkit.Training):
    def __init__(self, args, workers):
        self.args, self.workers = args, workers
        if args.batch_size % workers.size:
            raise ValueError("--batch-size (environments) must split over the workers")
        mx.random.seed(args.seed)
        self.net = Policy(args.hidden, args.layers, prefix="policy_")
        self.net.initialize(mx.init.Xavier())
        trainkit.hybridize(self.net, args)
        self.trainer = workers.trainer(self.net.collect_params(), "adam",
                                       {"learning_rate": args.lr})
        self.blocks, self.trainers = {"policy": self.net}, {"policy": self.trainer}
        self.returns = []

    def step(self, index, rng):
        envs = CartPoles(self.args.batch_size // self.workers.size, rng)
        observations, actions, alive, returns = play(self.net, envs, rng)
        self.returns.extend(returns.tolist())
        x, chosen, target = (trainkit.batch_array(part) for part in training_batch(
            observations, actions, alive, self.args.gamma))
        with autograd.record():
            log_probs, baseline = self.net(x)
            advantage = target - baseline
            loss = (-mx.nd.pick(log_probs, chosen) * advantage.detach()
                    + 0.5 * advantage ** 2)
        loss.backward()
        self.trainer.step(len(x))
        return float(loss.sum().asscalar()), alive.size

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
        return self.net(trainkit.batch_array(envs.state))[0].exp(), self.args.batch_size


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
