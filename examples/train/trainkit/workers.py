"""This process's place in data-parallel training: one process, or one of the
Horovod workers started by `horovodrun` (which sets HOROVOD_RANK); and how the
Trainers it makes update (`--whole-step`: gluon_dyn's fused updates)."""
import os

import mxnet as mx
import numpy as np
from mxnet import gluon

import gluon_dyn


class Workers:
    def __init__(self, fused_updates=False):
        self.fused_updates = fused_updates
        self.hvd = None
        self.rank, self.size = 0, 1
        if "HOROVOD_RANK" in os.environ:
            import horovod.mxnet as hvd
            hvd.init()
            self.hvd, self.rank, self.size = hvd, hvd.rank(), hvd.size()

    def trainer(self, params, optimizer, options, prefix=""):
        """gluon.Trainer in one process; across workers, parameters broadcast from
        rank 0 (those still awaiting deferred initialisation when they initialise)
        and gradients averaged by Horovod's DistributedTrainer. `prefix` tells
        several trainers' tensors apart. With `fused_updates` (--whole-step), every
        step updates all parameters as gluon_dyn.fused_updates makes it."""
        if self.hvd is None:
            trainer = gluon.Trainer(params, optimizer, options)
        else:
            self.hvd.broadcast_parameters(params, prefix=prefix)
            trainer = self.hvd.DistributedTrainer(params, optimizer, options, prefix=prefix)
        return gluon_dyn.fused_updates(trainer) if self.fused_updates else trainer

    def share(self, rows, axis=0):
        """This worker's contiguous share of a batch (a numpy array, split on `axis`;
        or a list). Every worker holds the same global batch and takes its part."""
        if self.size == 1:
            return rows
        count = len(rows) if isinstance(rows, list) else rows.shape[axis]
        if count % self.size:
            raise ValueError("a batch of %d cannot be split evenly over %d workers"
                             % (count, self.size))
        part = count // self.size
        start = self.rank * part
        if isinstance(rows, list):
            return rows[start:start + part]
        return np.take(rows, range(start, start + part), axis=axis)

    def total(self, *values):
        """The sums of numbers over the workers (one allreduce for all of them)."""
        if self.hvd is None:
            return values
        summed = self.hvd.allreduce(mx.nd.array(values, dtype="float64"), average=False,
                                    name="trainkit.total")
        return tuple(summed.asnumpy().tolist())

    def shutdown(self):
        mx.nd.waitall()
        if self.hvd is not None:
            self.hvd.shutdown()
