"""The cart-pole environments of cartpole.py and the episodes played in them, in numpy
alone: the classic control task (keep a pole upright by pushing the cart left or
right; +1 per step, at most 500 steps; the pole falls past 12 degrees or the cart
leaves +-2.4). Framework-free so that the PyTorch version of the script
(benchmarks/torch_training.py, in a process without MXNet) plays the same episodes.
"""
import numpy as np

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


def play(push_right_probabilities, envs, rng, greedy=False):
    """Plays until every environment's pole fell (or MAX_STEPS), deciding with
    `push_right_probabilities(observations)` (float64 (envs, 4) -> numpy (envs,)):
    the observations, actions and rewards of each environment, and each one's return."""
    observations, actions, alive = [], [], []
    running = np.ones(len(envs.state), dtype=bool)
    for _ in range(MAX_STEPS):
        probs = push_right_probabilities(envs.state)
        right = probs > 0.5 if greedy else rng.rand(len(probs)) < probs
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


def training_batch(observations, actions, alive, gamma):
    """The decisions of played episodes made while the pole was up, as a batch: their
    observations (decisions, 4), actions (float32, 1 = pushed right) and value targets
    (each one's discounted return / 100)."""
    taken = alive.reshape(-1)
    returns = discounted(alive, gamma).reshape(-1)[taken]
    return (observations.reshape(-1, 4)[taken], actions.reshape(-1)[taken].astype("float32"),
            returns / 100.0)
