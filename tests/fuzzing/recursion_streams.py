"""Streams of new trees through the recursion engine (`make fuzz`): one of the
recursive models of recursive_programs.py, imperative and
hybridize(dynamic=True), 8 to 30 calls on new random trees (sentences and
their parses, minibatches, a context array), inference and training with an
SGD step after each training call, compared call by call: outputs, parameter
gradients, input gradients (recursion_twins.assert_same); after each step the
dynamic twin takes the imperative twin's parameters, so that every call
compares the same function at the same point. A quarter of the streams (seed % 4
== 1) batch calls (batch_calls=True): each training step calls the model 1 to 3
times and sums the outputs through a HybridBlock, as a training step written per
example does, compared call by call (recursion_twins.assert_same_batch). Half the streams
never build a whole-call program, so that every call runs group by group;
the others run as the engine chooses. `check(seed)` repeats a stream.
"""
import dataclasses
import warnings

import mxnet as mx
import numpy as np
from mxnet import gluon

import gluon_dyn
import recursive_programs as programs
from gluon_dyn.hybridize.recursion import program_cache
from recursion_twins import assert_same, assert_same_batch, pair, sentence_pairs, trees

MODELS = (programs.TreeRNN, programs.LabelGatedRNN, programs.RecursiveForward,
          programs.MutualRecursion, programs.WholeSumRNN, programs.TopDownRNN,
          programs.ChildSumTreeLSTM, programs.MinibatchTreeLSTM, programs.SentenceTreeLSTM,
          programs.PairTreeLSTM)
# Larger rates grow the logits until an ulp of a parameter moves an output past
# the tolerance: imperative's own results become ill-conditioned.
LEARNING_RATE = 0.02
NEVER = (10 ** 9, 10 ** 9)   # program_cache.SIGHTINGS that never build a program


@dataclasses.dataclass
class StreamOutcome:
    model: str
    groups_only: bool
    calls: int           # calls of the model compared
    served: int          # calls the recursion engine served (batched calls included)
    batched: bool = False   # a stream whose training steps batch their calls
    merged: int = 0      # loss calls made one call on their rows (rowwise_losses.py)
    problem: str = None  # how the dynamic model differed or failed


def arguments(model, rng):
    """New arguments of a call of `model`, drawn from `rng`."""
    seed = int(rng.randint(1 << 30))
    if model is programs.ChildSumTreeLSTM:
        return (programs.random_tree(rng, rng.randint(2, 14), rng.choice([2, 3, 4])),)
    if model is programs.MinibatchTreeLSTM:
        return ([programs.random_tree(rng, rng.randint(2, 14), rng.choice([2, 3, 4]))
                 for _ in range(rng.randint(1, 4))],)
    if model is programs.SentenceTreeLSTM:
        return (sentence_pairs(seed, rng.randint(1, 4), words=(2, 14)),)
    if model is programs.PairTreeLSTM:
        lengths = rng.randint(2, 10, size=2)
        return (mx.nd, programs.sentence(rng, lengths[0]), programs.sentence(rng, lengths[1]),
                programs.dependency(rng, lengths[0]), programs.dependency(rng, lengths[1]))
    if model is programs.RecursiveForward:
        return (trees(seed, 1, leaves=(2, 14), arity=3)[0],)
    batch = trees(seed, rng.randint(1, 4), leaves=(2, 14), vectors=True)
    if model is programs.MutualRecursion:
        return batch, mx.nd.array(rng.standard_normal((1, programs.HIDDEN)))
    return (batch,)


def check(seed):
    """The StreamOutcome of stream `seed`."""
    rng = np.random.RandomState(seed)
    model = MODELS[rng.randint(len(MODELS))]
    groups_only = bool(rng.uniform() < 0.5)
    calls, training_share = rng.randint(8, 31), rng.uniform(0.2, 0.6)
    batched = seed % 4 == 1
    stock_loss = seed % 8 == 5    # half the batched streams: Gluon's SigmoidBCE, merged by rows
    outcome = StreamOutcome(model.__name__, groups_only, 0, 0, batched)
    sightings = program_cache.SIGHTINGS
    if groups_only:
        program_cache.SIGHTINGS = NEVER
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            imperative, dynamic = pair(model, batch_calls=batched)
            trainers = [gluon.Trainer(block.collect_params(), "sgd",
                                      {"learning_rate": LEARNING_RATE})
                        for block in (imperative, dynamic)]
            for _ in range(calls):
                args, train = arguments(model, rng), bool(rng.uniform() < training_share)
                argument_sets = [args] + ([arguments(model, rng) for _ in range(rng.randint(3))]
                                          if batched and train else [])
                try:
                    if batched and train:
                        assert_same_batch(imperative, dynamic, argument_sets, stock_loss)
                    else:
                        assert_same(imperative, dynamic, args, train)
                except Exception as error:  # noqa: BLE001 - the stream's finding
                    outcome.problem = "call %d (%s): %s: %s" % (
                        outcome.calls, "training" if train else "inference",
                        type(error).__name__, str(error).strip()[:2000])
                    break
                outcome.calls += len(argument_sets)
                if train:
                    for trainer in trainers:
                        trainer.step(1, ignore_stale_grad=True)
                    _share_parameters(imperative, dynamic)
        report = gluon_dyn.hybridize.report(dynamic)
        by_kind = report["calls"]["by_kind"]
        outcome.merged = (report["batched_calls"] or {}).get("loss_calls_merged", 0)
        outcome.served = by_kind["recursion"] + by_kind["batched"]
    finally:
        program_cache.SIGHTINGS = sightings
    return outcome


def _share_parameters(source, target):
    """`target`'s parameters set to `source`'s, in place. Twins trained apart drift
    by the rounding of their gradients (a few units in the last place after ten
    steps), and on the models whose outputs grow, a few units in the last place of
    a parameter move a later call's gradients by more than the tolerance (stream
    302094948: 5e-5 apart at call 15, where with equal parameters both are within
    5e-6 of a float64 run)."""
    for mine, theirs in zip(target.collect_params().values(), source.collect_params().values()):
        mine.set_data(theirs.data())


class StreamCoverage:
    """What the streams of a run covered: streams, calls, calls the engine served."""

    def __init__(self):
        self.streams = self.calls = self.served = self.disagreed = self.merged = 0

    def add(self, outcome):
        self.streams += 1
        self.calls += outcome.calls
        self.served += outcome.served
        self.merged += outcome.merged
        self.disagreed += outcome.problem is not None

    def summary(self):
        return ("%d recursion streams (%d calls, %d served by the recursion engine, %d loss "
                "calls merged by rows), %d disagreed" % (self.streams, self.calls, self.served,
                                                          self.merged, self.disagreed))
