"""Running a call's schedule: as one whole-call program (call_program.py), or
group by group, each group's graph called once with the arenas passed on.

A graph runs as an MXNet CachedOp (recorded under autograd.record(), whose
backward then flows through every group's gather and append), or for inference
under backend="tvm" as a tvm_bridge plan compiled with the numbers of nodes and
of arena rows left symbolic, so one plan serves every group and tree.
"""
import ctypes

import mxnet as mx
import numpy as np
from mxnet import autograd
from mxnet.base import _LIB, NDArrayHandle, check_call

from .batched_graph import ArenaInput, OwnInput, RowsInput
from .call_program import ArenaStart, GroupOwn, GroupRows

_INT32 = mx.ndarray.ndarray._DTYPE_NP_TO_MX[np.int32]


class GraphRunner:
    """Calls one graph (`symbol` with its `inputs`, as BatchedGraph and
    CallProgram give them); counts its calls and where they ran. `batched`: its
    numbers of nodes differ between calls (symbolic in a TVM plan). With
    `static_shape` (inputs whose shapes mostly repeat) MXNet runs inference as
    a few bulked engine operations instead of pushing each operator."""

    def __init__(self, symbol, inputs, tvm, batched=False, static_shape=False):
        self.symbol, self.inputs, self.tvm, self.batched = symbol, inputs, tvm, batched
        self._inference = mx.nd.CachedOp(symbol, flags=[("static_alloc", True),
                                                        ("static_shape", static_shape)])
        self._recording = None
        self.plan = None             # tvm_bridge.SegmentedGraph, once built
        self.plan_failed = False
        self.on_tvm = False          # the plan runs segments on TVM
        self.calls = {"mxnet": 0, "tvm": 0}

    def __call__(self, values):
        if autograd.is_recording():
            if self._recording is None:
                self._recording = mx.nd.CachedOp(self.symbol)
            return self._mxnet(self._recording, values)
        if self.tvm is not None and self.plan is None and not self.plan_failed:
            self.plan = self.tvm.symbolic_plan(self.symbol, values, self._symbolic_dims())
            self.plan_failed = self.plan is None
            self.on_tvm = self.plan is not None and not self.plan.uses_whole_graph and any(
                step.backend == "tvm" for step in self.plan.steps)
        if self.plan is not None:
            self.calls["tvm" if self.on_tvm else "mxnet"] += 1
            return self.plan(*values)
        return self._mxnet(self._inference, values)

    def _mxnet(self, op, values):
        self.calls["mxnet"] += 1
        results = op(*values)
        return list(results) if isinstance(results, (list, tuple)) else [results]

    def _symbolic_dims(self):
        """The input dims that differ between calls: numbers of rows (and of nodes)."""
        dims = {}
        for name, source in zip(self.symbol.list_inputs(), self.inputs):
            kind = type(source)
            if kind is ArenaInput:
                dims[name] = {0: "arena%d_rows" % source.arena.number}
            elif self.batched and kind is RowsInput:
                dims[name] = {1: "nodes"}
            elif self.batched and kind is OwnInput:
                dims[name] = {0: "nodes"}
        return dims


def index_array(indices):
    """The call's row indices (np.int32) as an NDArray, made through the C API
    (mx.nd.array costs five times more: it is called on every call)."""
    if not indices.size:
        return None
    context = mx.context.current_context()
    handle = NDArrayHandle()
    check_call(_LIB.MXNDArrayCreateEx((ctypes.c_uint * 1)(indices.size), 1,
                                      context.device_typeid, context.device_id, 0,
                                      _INT32, ctypes.byref(handle)))
    array = mx.nd.NDArray(handle)
    check_call(_LIB.MXNDArraySyncCopyFromCPU(handle, indices.ctypes.data_as(ctypes.c_void_p),
                                             ctypes.c_size_t(indices.size)))
    return array


def _rows(index, group):
    """The (calls, nodes) matrix of a group's callee rows: a view into the call's
    index array (made through the C API: the Python slicing and reshaping cost
    ten times more, per group of every call)."""
    part, view = NDArrayHandle(), NDArrayHandle()
    check_call(_LIB.MXNDArraySlice(index.handle, group.start, group.start + group.size,
                                   ctypes.byref(part)))
    try:
        check_call(_LIB.MXNDArrayReshape64(part, 2, (ctypes.c_int64 * 2)(
            group.calls, group.capacity), False, ctypes.byref(view)))
    finally:
        check_call(_LIB.MXNDArrayFree(part))
    return mx.nd.NDArray(view)


class ArraysDiffer(Exception):
    """An array a node read is not of the shape or dtype of its body's input
    (the compiled walk took it to be, unchecked): the call is walked again."""


def stacked_own(group, index):
    """The group's own arrays number `index` (or numpy data, from numbers of the
    structure) along axis 0, the first node's again on the rows past its nodes
    (its capacity), checked against the body's input: each node's array has the
    body's shape and dtype, whose leading axis is 1 when the group has several
    rows, exactly when the stacked array has the shape of that many rows (concat
    refuses inputs whose other axes, rank or dtype differ)."""
    arrays = [invocation.arrays[index] for invocation in group.invocations]
    arrays += arrays[:1] * (group.capacity - len(arrays))
    if isinstance(arrays[0], np.ndarray):
        return mx.nd.array(np.concatenate(arrays), dtype=arrays[0].dtype)
    body = group.body
    shape = body.shapes[body.own_inputs[index]]
    try:
        stacked = arrays[0] if len(arrays) == 1 else mx.nd.concat(*arrays, dim=0)
    except mx.base.MXNetError as error:
        raise ArraysDiffer(str(error)) from None
    if stacked.shape != (len(arrays) * shape[0],) + shape[1:] or \
            stacked.dtype != body.own_dtypes[index]:
        raise ArraysDiffer("%s %s, not %s" % (stacked.shape, stacked.dtype, shape))
    return stacked


def run_program(runner, schedule, zeros_of):
    """Runs the whole call as one program (`runner` calls its CallProgram);
    returns the entry's outputs. `zeros_of(arena)` gives an arena's first arrays."""
    groups, index = schedule.groups, index_array(schedule.indices)
    values = []
    for source in runner.inputs:
        kind = type(source)
        if kind is GroupRows:
            values.append(_rows(index, groups[source.group]))
        elif kind is GroupOwn:
            values.append(stacked_own(groups[source.group], source.index))
        elif kind is ArenaStart:
            values.append(zeros_of(source.arena)[source.index])
        else:
            values.append(source.value(None, None))
    return runner(values)


def run_groups(schedule, zeros_of, runner_of):
    """Runs the schedule group by group; returns the entry's outputs.
    `runner_of(body)` gives the GraphRunner of a body's BatchedGraph."""
    arenas, index = {}, index_array(schedule.indices)
    for group in schedule.groups:
        graph = group.body.graph
        values = []
        for source in graph.inputs:
            kind = type(source)
            if kind is ArenaInput:
                if source.arena not in arenas:
                    arenas[source.arena] = zeros_of(source.arena)
                values.append(arenas[source.arena][source.index])
            elif kind is RowsInput:
                values.append(_rows(index, group))
            elif kind is OwnInput:
                values.append(stacked_own(group, source.index))
            else:
                values.append(source.value(None, None))
        results = runner_of(group.body)(values)
        if graph.appends_to is not None:
            arenas[graph.appends_to] = results
    return results
