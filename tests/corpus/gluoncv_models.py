"""GluonCV 0.10.5 programs, as installed: classification CNNs, the detectors (SSD,
YOLOv3, Faster R-CNN, CenterNet) with their post-processing, whose outputs have
data-dependent shapes, and a segmentation model. Each trains with the loss and the
targets its own training script makes (GluonCV's losses and training transforms)."""
import functools
import warnings

import mxnet as mx
import numpy as np
from gluoncv import loss as gcv_loss
from gluoncv.data.batchify import Pad, Stack, Tuple
from gluoncv.data.transforms import presets
from gluoncv.data import VOCDetection
from gluoncv.model_zoo import get_model
from gluoncv.model_zoo.rcnn.faster_rcnn.faster_rcnn import get_faster_rcnn
from gluoncv.model_zoo.resnetv1b import resnet18_v1b
from gluoncv.model_zoo.ssd.target import SSDTargetGenerator
from mxnet import autograd, gluon
from mxnet.gluon import nn

from .program import Program, integers, uniform

IMAGE = 128     # detectors' input side
SMALL_IMAGE = 64


def initialized(name, side, init=None, **options):
    """GluonCV's model `name` (pretrained=False), initialized as its training scripts
    do (`init`; Gluon's default for the detectors), and called once on a
    `side`x`side` image (Gluon's deferred shapes)."""
    net = get_model(name, pretrained=False, **options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # parts the constructor initialized already
        net.initialize(init if init is not None else mx.init.Uniform())
    with autograd.pause():
        net(mx.nd.zeros((1, 3, side, side)))
    return net


def images(side, batch=1):
    return lambda call: (uniform((batch, 3, side, side), call, -1, 1),)


# Classification ------------------------------------------------------------------------

def classification(name, side=SMALL_IMAGE, classes=10):
    def batch(step):
        return uniform((2, 3, side, side), 100 + step, -1, 1), integers((2,), step, classes)

    def loss(model, x, label):
        return gluon.loss.SoftmaxCrossEntropyLoss()(model(x), label).mean()
    return Program(
        name="gluoncv_" + name, package="gluoncv", covers="classification CNN",
        build=functools.partial(initialized, name, side, mx.init.Xavier(magnitude=2),
                                classes=classes),
        inputs=images(side, 2), batch=batch, loss=loss)


# Detection -----------------------------------------------------------------------------

def labelled_images(step, count=2):
    """(image HWC uint8, label rows [x1, y1, x2, y2, class]) as detection datasets give."""
    rng = np.random.RandomState(300 + step)
    result = []
    for _ in range(count):
        image = mx.nd.array(rng.randint(0, 255, (IMAGE + 32, IMAGE + 32, 3)).astype("uint8"))
        corners = np.sort(rng.uniform(0, IMAGE + 31, (2, 2, 2)), axis=1)
        boxes = np.concatenate([corners[:, 0], corners[:, 1]], axis=1)
        classes = rng.randint(0, 20, (2, 1))
        result.append((image, np.concatenate([boxes, classes], axis=1).astype("float32")))
    return result


@functools.lru_cache(maxsize=None)
def anchors_of(name):
    """A model of `name` whose anchors GluonCV's training transforms read (anchors do
    not depend on the weights)."""
    return initialized(name, IMAGE, pretrained_base=False)


def ssd():
    name = "ssd_512_mobilenet1.0_voc"

    def batch(step):
        images_, labels = zip(*labelled_images(step))
        transform = presets.ssd.SSDDefaultValTransform(IMAGE, IMAGE)
        data, boxes = zip(*[transform(image, label) for image, label in zip(images_, labels)])
        padded = Pad(pad_val=-1)(boxes)
        return mx.nd.stack(*data), padded

    def loss(model, data, boxes):
        cls_preds, box_preds, anchors = model(data)
        with autograd.pause():   # as SSDDefaultTrainTransform makes them, from the anchors
            cls_targets, box_targets, _ = SSDTargetGenerator(
                iou_thresh=0.5, stds=(0.1, 0.1, 0.2, 0.2), negative_mining_ratio=-1)(
                    anchors, None, boxes.slice_axis(axis=-1, begin=0, end=4),
                    boxes.slice_axis(axis=-1, begin=4, end=5))
        sum_loss, _, _ = gcv_loss.SSDMultiBoxLoss()(cls_preds, box_preds, cls_targets,
                                                    box_targets)
        return mx.nd.add_n(*sum_loss)
    return Program(
        name="gluoncv_ssd_mobilenet", package="gluoncv",
        covers="detector (SSD): box decoding and NMS post-processing, data-dependent shapes",
        build=functools.partial(initialized, name, IMAGE, pretrained_base=False),
        inputs=images(IMAGE), batch=batch, loss=loss, inference_calls=5,
        steps_from_initial_parameters=True)


def yolo3():
    name = "yolo3_mobilenet0.25_voc"

    def batch(step):
        transform = presets.yolo.YOLO3DefaultTrainTransform(IMAGE, IMAGE, anchors_of(name))
        batchify = Tuple(*([Stack() for _ in range(6)] + [Pad(axis=0, pad_val=-1)]))
        data, *targets, boxes = batchify([transform(image, label)
                                          for image, label in labelled_images(step)])
        return (data, boxes, *targets)

    def loss(model, data, boxes, *targets):
        return mx.nd.add_n(*[part.sum() for part in model(data, boxes, *targets)])
    return Program(
        name="gluoncv_yolo3_mobilenet", package="gluoncv",
        covers="detector (YOLOv3): training targets in the forward, NMS post-processing",
        build=functools.partial(initialized, name, IMAGE, pretrained_base=False),
        inputs=images(IMAGE), batch=batch, loss=loss, inference_calls=5)


def small_faster_rcnn():
    """GluonCV's Faster R-CNN as its predefined resnet50_v1b_voc model builds it
    (get_faster_rcnn, VOC's classes), on ResNet-18 v1b and with fewer proposals:
    the ResNet-50 one takes 8 s per 128x128 image on 2 cores (300 ROIs through
    layer4)."""
    base = resnet18_v1b(pretrained=False, dilated=False, use_global_stats=True)
    features, top_features = nn.HybridSequential(), nn.HybridSequential()
    for layer in ["conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3"]:
        features.add(getattr(base, layer))
    top_features.add(base.layer4)
    return get_faster_rcnn(
        name="resnet18_v1b", dataset="voc", pretrained=False, features=features,
        top_features=top_features, classes=VOCDetection.CLASSES, short=IMAGE, max_size=IMAGE,
        train_patterns="|".join([".*dense", ".*rpn", ".*layers(2|3|4)_conv"]),
        nms_thresh=0.3, nms_topk=100, post_nms=20, roi_mode="align", roi_size=(7, 7),
        strides=16, clip=None, rpn_channel=64, base_size=16, scales=(2, 4, 8, 16, 32),
        ratios=(0.5, 1, 2), alloc_size=(128, 128), rpn_nms_thresh=0.7, rpn_train_pre_nms=500,
        rpn_train_post_nms=100, rpn_test_pre_nms=500, rpn_test_post_nms=50, rpn_min_size=16,
        num_sample=32, pos_iou_thresh=0.5, pos_ratio=0.25, max_num_gt=20)


@functools.lru_cache(maxsize=None)
def rpn_anchors():
    """A Faster R-CNN whose anchors FasterRCNNDefaultTrainTransform reads."""
    return faster_rcnn_initialized()


def faster_rcnn_initialized():
    net = small_faster_rcnn()
    net.initialize()
    with autograd.pause():
        net(mx.nd.zeros((1, 3, IMAGE, IMAGE)))
    return net


def faster_rcnn():
    def optimizer(model):   # the layers train_faster_rcnn.py trains
        trainer = gluon.Trainer(model.collect_train_params(), "sgd", {"learning_rate": 0.001})
        return lambda: trainer.step(1)

    def batch(step):
        transform = presets.rcnn.FasterRCNNDefaultTrainTransform(
            IMAGE, IMAGE, rpn_anchors(), flip_p=0.5)
        data, label, rpn_cls, rpn_box, rpn_mask = transform(*labelled_images(step, 1)[0])
        return tuple(mx.nd.array(part).expand_dims(0)
                     for part in (data, label, rpn_cls[0], rpn_box[0], rpn_mask[0]))

    def loss(model, data, label, rpn_cls_targets, rpn_box_targets, rpn_box_masks):
        """The losses of GluonCV's train_faster_rcnn.py."""
        gt_label, gt_box = label.slice_axis(axis=-1, begin=4, end=5), \
            label.slice_axis(axis=-1, begin=0, end=4)
        (cls_pred, box_pred, _, _, _, rpn_score, rpn_box, _, cls_targets, box_targets,
         box_masks, _) = model(data, gt_box, gt_label)
        rpn_score = rpn_score.squeeze(axis=-1)
        rpn_cls_targets = rpn_cls_targets.reshape(rpn_score.shape)
        rpn_box_targets = rpn_box_targets.reshape(rpn_box.shape)
        rpn_box_masks = rpn_box_masks.reshape(rpn_box.shape)
        num_rpn = (rpn_cls_targets >= 0).sum()
        rpn_1 = gluon.loss.SigmoidBinaryCrossEntropyLoss(from_sigmoid=False)(
            rpn_score, rpn_cls_targets, rpn_cls_targets >= 0) * rpn_cls_targets.size / num_rpn
        rpn_2 = gluon.loss.HuberLoss(rho=1 / 9.)(
            rpn_box, rpn_box_targets, rpn_box_masks) * rpn_box.size / num_rpn
        num_rcnn = (cls_targets >= 0).sum()
        rcnn_1 = gluon.loss.SoftmaxCrossEntropyLoss()(
            cls_pred, cls_targets, cls_targets.expand_dims(-1) >= 0) * cls_targets.size / num_rcnn
        rcnn_2 = gluon.loss.HuberLoss()(box_pred, box_targets, box_masks) * box_pred.size / num_rcnn
        return rpn_1.sum() + rpn_2.sum() + rcnn_1.sum() + rcnn_2.sum()
    return Program(
        name="gluoncv_faster_rcnn_resnet18", package="gluoncv",
        covers="detector (Faster R-CNN): proposals, ROI sampling, NMS, data-dependent shapes",
        build=faster_rcnn_initialized, inputs=images(IMAGE), batch=batch, loss=loss,
        optimizer=optimizer,
        inference_calls=5)


def center_net():
    name = "center_net_resnet18_v1b_voc"

    def batch(step):
        transform = presets.center_net.CenterNetDefaultTrainTransform(
            IMAGE, IMAGE, num_class=20, scale_factor=4)
        return Tuple(*[Stack()] * 6)([transform(image, label)
                                      for image, label in labelled_images(step)])

    def loss(model, data, heatmap, wh_target, wh_mask, center_reg, center_reg_mask):
        """The losses of GluonCV's train_center_net.py."""
        heatmap_pred, wh_pred, center_reg_pred = model(data)
        return gcv_loss.HeatmapFocalLoss(from_logits=True)(heatmap_pred, heatmap).sum() + \
            gcv_loss.MaskedL1Loss(weight=0.1)(wh_pred, wh_target, wh_mask).sum() + \
            gcv_loss.MaskedL1Loss(weight=1.0)(center_reg_pred, center_reg,
                                               center_reg_mask).sum()
    return Program(
        name="gluoncv_center_net_resnet18", package="gluoncv",
        covers="detector (CenterNet): heatmap top-k decoding",
        build=functools.partial(initialized, name, IMAGE, pretrained_base=False),
        inputs=images(IMAGE), batch=batch, loss=loss, inference_calls=5)


# Segmentation --------------------------------------------------------------------------

def fcn():
    def batch(step):
        return uniform((1, 3, SMALL_IMAGE, SMALL_IMAGE), 100 + step, -1, 1), \
            integers((1, SMALL_IMAGE, SMALL_IMAGE), step, 21)

    def loss(model, x, target):
        return gcv_loss.MixSoftmaxCrossEntropyLoss(aux=True)(*model(x), target).mean()
    return Program(
        name="gluoncv_fcn_resnet50", package="gluoncv", covers="segmentation model",
        build=functools.partial(initialized, "fcn_resnet50_voc", SMALL_IMAGE,
                                pretrained_base=False, crop_size=SMALL_IMAGE),
        inputs=images(SMALL_IMAGE), batch=batch, loss=loss, inference_calls=5,
        # A difference in the last bits of a step grows fast here: 6e-8 in a weight
        # at the first step on graphs, 1e-3 of the loss two steps later, 0.5% after
        # five; two imperative runs without MKLDNN (2 threads) depart alike.
        steps_from_initial_parameters=True)


PROGRAMS = [classification("resnet18_v1b"), classification("mobilenetv2_0.25"),
            ssd(), yolo3(), faster_rcnn(), center_net(), fcn()]
