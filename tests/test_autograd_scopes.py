"""`with autograd.pause()`, `predict_mode()`, `train_mode()` and `record()` inside a
traced forward (GluonCV's target generators, GluonNLP's AWD-LSTM decoder): in the
graph, what is made while autograd does not record passes no gradient on, and
operators inside run in the scope's training mode (a Dropout under predict_mode is
an identity, under train_mode in a prediction graph it drops); what no graph can
reproduce runs as Python, said so."""
import numpy as np
from mxnet import autograd, gluon, nd

import gluon_dyn  # noqa: F401
from idiom_twins import on_graphs, python_reasons, same_as_written

RNG = np.random.RandomState(11)


def calls(count=6):
    return [(nd.array(RNG.randn(3, 4)),) for _ in range(count)]


class Scoped(gluon.Block):
    def __init__(self, scope):
        super().__init__()
        self.scope = scope
        with self.name_scope():
            self.first = gluon.nn.Dense(6, in_units=4)
            self.second = gluon.nn.Dense(6, in_units=6)
            self.drop = gluon.nn.Dropout(0.5)
            self.norm = gluon.nn.BatchNorm(in_channels=6)


class Paused(Scoped):
    """A target computed under pause(): no gradient reaches `second` or `first`
    through it; split's outputs, taken apart inside, none either."""

    def forward(self, x):
        h = self.first(x)
        with autograd.pause():
            target = self.second(h) * 2
            low, high = nd.split(target, 2, axis=1)
            inner = self.drop(h)          # pause() predicts: an identity
        return h * target + low.sum() + high.sum() + inner


class Predicting(Scoped):
    """AWD-LSTM's decoder under predict_mode() while training: the dropout inside
    keeps everything."""

    def forward(self, x):
        h = self.drop(self.first(x))
        with autograd.predict_mode():
            out = self.second(self.drop(h))
        return out


class Training(Scoped):
    """train_mode() in a prediction call: the dropout inside drops (mode="always")."""

    def forward(self, x):
        h = self.first(x)
        with autograd.train_mode():
            h = self.drop(h)
        return self.second(h)


def test_pause_blocks_gradients_of_what_is_made_inside():
    on_graphs(same_as_written(lambda: Paused("pause"), calls(), train=True), 3)


def test_predict_mode_in_training_runs_dropout_as_an_identity():
    on_graphs(same_as_written(lambda: Predicting("predict"), calls(), train=True, random_seed=3), 3)


def test_train_mode_in_prediction_runs_dropout_as_in_training():
    report = same_as_written(lambda: Training("train"), calls(), random_seed=5)
    on_graphs(report, 3)


class PredictingInALoop(Scoped):
    """predict_mode() inside a loop on a tensor: the identity that stands for the
    Dropout belongs to the loop's body (a node made without the body's scope
    attributes was cut out of it as an outer input)."""

    def forward(self, x, limit):
        i = nd.zeros((1,))
        while i.sum() < limit.sum():
            i = i + 1
            with autograd.predict_mode():
                x = self.drop(x) * 0.5 + 1
        return self.first(x)


def test_predict_mode_inside_a_loop_on_a_tensor_runs_on_graphs():
    loop_calls = [(nd.array(RNG.randn(3, 4)), nd.array([n])) for n in (0, 2, 1, 3, 2, 2)]
    on_graphs(same_as_written(lambda: PredictingInALoop("loop"), loop_calls, train=True,
                              random_seed=7), 3)


class NormPredicting(Scoped):
    def forward(self, x):
        h = self.first(x)
        with autograd.predict_mode():
            h = self.norm(h)
        return h


def test_batchnorm_in_predict_mode_while_recording_runs_as_python():
    """MXNet's backward runs in training mode: a BatchNorm recorded in prediction mode
    gets its training-mode gradient from what its forward kept, which no graph
    gives; without recording, the graph uses its running statistics."""
    report = same_as_written(lambda: NormPredicting("norm"), calls(), train=True)
    assert any("BatchNorm in prediction mode while autograd records" in reason
               for reason in python_reasons(report)), report
    on_graphs(same_as_written(lambda: NormPredicting("norm"), calls()), 3)


class RecordsInside(Scoped):
    def forward(self, x):
        with autograd.record():
            h = self.first(x)
        return h


def test_record_inside_a_forward_called_without_recording_runs_as_python():
    report = same_as_written(lambda: RecordsInside("record"), calls())
    assert any("`autograd.record()` inside a forward called without recording" in reason
               for reason in python_reasons(report)), report


class Opened:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class OtherManager(Scoped):
    def forward(self, x):
        with Opened():
            h = self.first(x)
        return h


def test_other_context_managers_still_run_as_python():
    report = same_as_written(lambda: OtherManager("other"), calls())
    assert any("`with Opened` enters and exits a context manager on every call" in reason
               for reason in python_reasons(report)), report


def test_scopes_leave_autograd_as_they_found_it():
    block = Paused("pause")
    block.initialize()
    block.hybridize(dynamic=True)
    for _ in range(5):
        with autograd.record():
            block(nd.ones((3, 4)))
            assert autograd.is_recording() and autograd.is_training()
    assert not autograd.is_recording() and not autograd.is_training()
