"""Child blocks of a dynamic block run as their code says, in every mode.

Gluon serves a hybridized block from the graph its first call traced: Python
control flow in its hybrid_forward (`if autograd.is_training():`) and state it
keeps are frozen there. Under a block hybridized with dynamic=True, children run
as written whenever the parent runs as Python (profiling, fallback), and the
parent's graphs are keyed by the training mode, so that a call in one mode never
gets what was built for the other.
"""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_dyn
from dynamic_twins import assert_same, calls_on_graphs, twins


class TwoModes(gluon.HybridBlock):
    """Returns more values in training, as GluonCV's YOLOOutputV3 does."""

    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(4, in_units=4)

    def hybrid_forward(self, F, x):
        y = self.dense(x)
        if autograd.is_training():
            return y, F.relu(y), F.sigmoid(y)
        return y


class Detector(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        self.head = TwoModes()

    def hybrid_forward(self, F, x, target=None):
        if autograd.is_training():
            y, positive, score = self.head(x)
            return F.mean(F.square(y - target)) + F.mean(positive * score)
        return self.head(x)


def test_a_child_with_python_branches_serves_each_mode():
    imperative, dynamic = twins(Detector, check_speed=False)
    target = mx.nd.ones((2, 4))
    for call in range(10):
        x = mx.nd.random.normal(shape=(2, 4))
        if call % 3 == 2:
            losses = []
            for block in (imperative, dynamic):
                with autograd.record():
                    loss = block(x, target)
                loss.backward()
                losses.append((loss, block.head.dense.weight.grad().copy()))
            assert_same(losses[1], losses[0], "training call %d" % call)
        else:
            assert_same(dynamic(x), imperative(x), "inference call %d" % call)
    assert calls_on_graphs(dynamic) == 7


def test_children_take_what_operators_take():
    """A batch in shared memory (GluonCV's and Gluon's batchify functions make them)
    goes through MXNet's operators, but not through a hybridized block's CachedOp."""
    imperative, dynamic = twins(Detector, check_speed=False)
    for call in range(5):
        x = mx.nd.random.normal(shape=(2, 4)).as_in_context(mx.Context("cpu_shared", 0))
        assert_same(dynamic(x), imperative(x), "call %d" % call)
    assert calls_on_graphs(dynamic) == 2


class Shifted(gluon.HybridBlock):
    """Reads a constant and a parameter, as GluonCV's box encoders read their `means`."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.means = self.params.get_constant("means", [[0.5, -0.5, 1.0, 2.0]])
            self.scale = self.params.get("scale", shape=(1, 4), init=mx.init.Constant(1.5))

    def hybrid_forward(self, F, x, means, scale):
        return F.broadcast_mul(F.broadcast_sub(x, means), scale)


class BuildsAChildOnFirstUse(gluon.HybridBlock):
    """Builds a child when training first asks for it, as GluonCV's Faster R-CNN
    builds its target generator; or keeps it in a set, out of Gluon's tree."""

    def __init__(self, in_a_set=False):
        super().__init__()
        self.dense = gluon.nn.Dense(4, in_units=4)
        self._encoder = set([_initialized(Shifted())]) if in_a_set else Shifted

    @property
    def encoder(self):
        if isinstance(self._encoder, set):
            return next(iter(self._encoder))
        if not isinstance(self._encoder, gluon.Block):   # built on first use
            self._encoder = _initialized(self._encoder())
        return self._encoder

    def hybrid_forward(self, F, x):
        y = self.dense(x)
        if autograd.is_training():
            return self.encoder(y)
        return y


def _initialized(block):
    block.initialize()
    return block


@pytest.mark.parametrize("in_a_set", [False, True])
def test_a_childs_parameters_that_collect_params_missed_are_graph_inputs(in_a_set):
    """The first training call traces the graph of training (inference calls came
    first) and builds the child, after the trace took the model's parameters; or the
    child is kept out of Gluon's tree. Graphs read its parameters (the dynamic block
    fell back to Python, calling them "a value computed inside a graph loop or
    branch")."""
    imperative, dynamic = twins(lambda: BuildsAChildOnFirstUse(in_a_set), check_speed=False)
    for call in range(9):
        x = mx.nd.array(np.random.RandomState(call).standard_normal((2, 4)))
        if call < 4:
            assert_same(dynamic(x), imperative(x), "inference call %d" % call)
            continue
        results = []
        for block in (imperative, dynamic):
            with autograd.record():
                y = block(x)
            y.backward()
            results.append((y, block.dense.weight.grad().copy(),
                            block.encoder.scale.grad().copy()))
        assert_same(results[1], results[0], "training call %d" % call)
    report = gluon_dyn.hybridize.report(dynamic)
    assert report["fallback"] is None and calls_on_graphs(dynamic) == 6, report["fallback"]


def test_yolo3_trains_after_inference_calls():
    """GluonCV 0.10's YOLOv3, as installed: inference calls, then training steps
    whose targets come from GluonCV's own training transform."""
    from gluoncv.data.batchify import Pad, Stack, Tuple
    from gluoncv.data.transforms.presets.yolo import YOLO3DefaultTrainTransform
    from gluoncv.model_zoo import get_model

    def make():
        return get_model("yolo3_mobilenet0.25_voc", pretrained=False, pretrained_base=False)
    imperative, dynamic = twins(make, example=(mx.nd.zeros((1, 3, 128, 128)),),
                                init=mx.init.Xavier(), check_speed=False)
    for call in range(6):
        x = mx.nd.random.uniform(shape=(1, 3, 128, 128))
        assert_same(dynamic(x), imperative(x), "inference call %d" % call)
    # A batch as GluonCV's train_yolo3.py makes it: boxes padded (random crops keep
    # some boxes and drop others).
    transform = YOLO3DefaultTrainTransform(128, 128, imperative)
    image = mx.nd.array(np.random.randint(0, 255, (160, 160, 3)).astype("uint8"))
    label = np.array([[10, 20, 100, 120, 3], [50, 40, 140, 150, 7]], dtype="float32")
    batchify = Tuple(*([Stack() for _ in range(6)] + [Pad(axis=0, pad_val=-1)]))
    data, *targets, boxes = batchify([transform(image, label) for _ in range(2)])
    for step in range(3):
        results = []
        for block in (imperative, dynamic):
            with autograd.record():
                losses = block(data, boxes, *targets)
            autograd.backward(losses)
            weight = block.yolo_outputs[0].prediction.weight
            results.append((losses, weight.grad().copy()))
        assert_same(results[1], results[0], "training step %d" % step, atol=1e-4)
    report = gluon_dyn.hybridize.report(dynamic)
    # 3 inference calls after profiling, then the training steps: their target
    # generator's `with autograd.pause()` is in the graph too.
    assert calls_on_graphs(dynamic) == 6 and not report["internal_errors"]


def test_yolo3_detections_equal_imperative_bit_for_bit():
    """GluonCV's YOLOv3 with Gluon's default initialization: every score saturates to
    1, so non-maximum suppression orders detections of equal score by the last bits
    of the boxes. The graph computes what decides (here everything before NMS) as
    imperative MXNet does, so the same detections come out in the same order."""
    from gluoncv.model_zoo import get_model

    def make():
        return get_model("yolo3_darknet53_voc", pretrained=False, pretrained_base=False)
    imperative, dynamic = twins(make, example=(mx.nd.zeros((1, 3, 128, 128)),),
                                init=mx.init.Uniform(), check_speed=False)
    for call in range(7):
        x = mx.nd.random.uniform(shape=(1, 3, 128, 128))
        for got, expected in zip(dynamic(x), imperative(x)):
            assert np.array_equal(got.asnumpy(), expected.asnumpy(), equal_nan=True), call
    assert calls_on_graphs(dynamic) == 4


class KeepsPositive(gluon.HybridBlock):
    """A list appended to under a tensor `if` and stacked: its graph cut around the
    boolean_mask that keeps the present elements."""

    def hybrid_forward(self, F, x):
        kept = [x]
        if F.sum(x) > 0:
            kept.append(x * 2)
        return F.sum(F.stack(*kept), axis=0)


class CallsItsChildThrice(gluon.Block):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.child = KeepsPositive()

    def forward(self, x):
        return [self.child(x), self.child(-x), self.child(x * 0.25)]


def test_a_hybrid_child_called_thrice_in_one_graph_gives_each_call_its_own_result():
    """Gluon names the operators of each call of a HybridBlock alike; the graph
    cut around each call's boolean_mask took them for one another, and every call
    returned the last one's values."""
    imperative, dynamic = twins(CallsItsChildThrice, speculate=False, check_speed=False)
    for seed in range(4):
        x = mx.nd.array(np.random.RandomState(seed).randn(3, 4) + 0.5)
        assert_same(dynamic(x), imperative(x), "call %d" % seed)
    assert calls_on_graphs(dynamic) == 4
