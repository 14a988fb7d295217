"""Horovod's `DistributedTrainer` with one process's stale-gradient semantics.

In one process, a parameter that no backward since the last `step` used keeps
a stale gradient: `step(ignore_stale_grad=True)` skips it and `step()` raises.
Horovod 0.28's `DistributedTrainer` averages every gradient buffer, stale or
not, and then each worker applies its own freshness: when workers take
different branches of a data-dependent `if`, a stale value from an earlier step
enters the average, and the workers that used the parameter update it while the
others skip it (or raise while the rest wait in the next allreduce).

With gluon_dyn imported, the workers first agree on which gradients are fresh
(one allreduce of a flag per parameter), then:

- a parameter fresh on some worker is averaged with a zero contribution from
  the workers whose path did not use it, and is fresh on every worker;
- a parameter fresh on none is not touched: it stays stale everywhere, so every
  worker skips it or every worker raises MXNet's error.

The step is then the step of one process that ran each worker's part of the
batch as its own forward and backward with gradients added
(`grad_req='add'`). The patch applies when `horovod.mxnet` is imported, before
or after gluon_dyn.
"""
import functools
import importlib.abc
import importlib.machinery
import sys

import numpy as np

from .host_arrays import host_array

MODULE = "horovod.mxnet"


def _agreeing_on_fresh_gradients(allreduce_grads):
    @functools.wraps(allreduce_grads)
    def wrapper(self):
        process_set = self._process_set
        if process_set.size() == 1 or not process_set.included():
            return allreduce_grads(self)
        from horovod.mxnet import allreduce_
        params = [p for p in self._params if p.grad_req != "null"]
        local = [bool(p.list_data()[0]._fresh_grad) for p in params]
        # A stale gradient is sent as zeros (kept aside, in case no worker has a
        # fresh one); the flags are summed alongside the gradients, asynchronously,
        # so agreeing costs no extra wait.
        kept = {}
        for param, fresh in zip(params, local):
            if not fresh:
                kept[param] = param.list_grad()[0].copy()
                param.list_grad()[0][:] = 0
        users = host_array(np.array(local, np.float32))
        allreduce_(users, average=False, name="%sgluon_dyn.fresh_gradients" % self._prefix,
                   process_set=process_set)
        allreduce_grads(self)
        for param, count in zip(params, users.asnumpy()):
            if count == 0:
                kept[param].copyto(param.list_grad()[0])   # stale on every worker: untouched
            else:
                param.list_data()[0]._fresh_grad = True
    wrapper.gluon_dyn_patched = True
    return wrapper


def patch(module):
    trainer = module.DistributedTrainer
    if not getattr(trainer._allreduce_grads, "gluon_dyn_patched", False):
        trainer._allreduce_grads = _agreeing_on_fresh_gradients(trainer._allreduce_grads)


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: gives `horovod.mxnet` a loader that patches it once
    it has run."""

    def find_spec(self, name, path, target=None):
        if name != MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None:
            spec.loader = _PatchingLoader(spec.loader)
        return spec


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        patch(module)


def install():
    if MODULE in sys.modules:
        patch(sys.modules[MODULE])
    elif not any(isinstance(finder, _PatchOnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport())
