"""Running a call's schedule: as one whole-call program (call_program.py), or
group by group, each group's graph called once with the arenas passed on.

A graph runs as an MXNet CachedOp (recorded under autograd.record(), whose
backward then flows through every group's gather and append; for inference on
one OpenMP thread where all its arrays are small, threads.py), or for inference
under backend="tvm" as a tvm_bridge plan compiled with the numbers of nodes and
of arena rows left symbolic, so one plan serves every group and tree.
"""
import collections
import ctypes
import math

import mxnet as mx
import numpy as np
from mxnet import autograd
from mxnet.base import _LIB, NDArrayHandle, check_call

from ... import threads
from ...host_arrays import host_array
from ..capturing.capture import input_roles
from ..passes.read_once import planned_flags, planned_op, read_once
from .batched_graph import DOWN, ArenaInput, OwnInput, RowsInput, SharedInput, WrittenRowsInput
from .body import WHOLE
from .call_program import ArenaStart, GroupOwn, GroupRows
from .passes import Passed
from .schedule import distinct_arrays, power_of_two

SHAPES_KEPT = 32     # per graph: the static CachedOps of its most recent input shapes


class GraphRunner:
    """Calls one graph (`symbol` with its `inputs`, as BatchedGraph and
    CallProgram give them); counts its calls and where they ran. `dims`: the
    input dims that differ between calls (symbolic in a TVM plan,
    BatchedGraph.symbolic_dims). With `static_shape` (inputs whose shapes mostly
    repeat) MXNet runs inference as a few bulked engine operations instead of
    pushing each operator (read_once.planned_op)."""

    def __init__(self, symbol, inputs, tvm, dims=None, static_shape=False):
        self.symbol, self.inputs, self.tvm, self.dims = symbol, inputs, tvm, dims or {}
        # MXNet makes no CachedOp of a graph without inputs (constants): evaluated.
        self._inference = (planned_op(symbol, input_roles(inputs)) if static_shape else
                           mx.nd.CachedOp(symbol, flags=[("static_alloc", True)])) \
            if inputs else _Constants(symbol)
        self._recording = None
        self.plan = None             # tvm_bridge.SegmentedGraph, once built
        self.plan_failed = False
        self.on_tvm = False          # the plan runs segments on TVM
        self.calls = {"mxnet": 0, "tvm": 0, "one_thread": 0}
        self._one_thread = OneThreadChoice(symbol, inputs)

    def __call__(self, values):
        if autograd.is_recording() and values:
            if self._recording is None:
                self._recording = mx.nd.CachedOp(self.symbol)
            return self._mxnet(self._recording, values)
        if self.tvm is not None and self.plan is None and not self.plan_failed:
            self.plan = self.tvm.symbolic_plan(self.symbol, values, self.dims)
            self.plan_failed = self.plan is None
            self.on_tvm = self.plan is not None and not self.plan.uses_whole_graph and any(
                step.backend == "tvm" for step in self.plan.steps)
        if self.plan is not None:
            self.calls["tvm" if self.on_tvm else "mxnet"] += 1
            return self.plan(*values)
        return self._mxnet(self._inference, values)

    def _mxnet(self, op, values, one_thread=None):
        """Runs `op`, a CachedOp of this graph (or of its form placed bucketed,
        whose `one_thread` says whether it runs on one OpenMP thread)."""
        self.calls["mxnet"] += 1

        def run():
            results = op(*values)
            return list(results) if isinstance(results, (list, tuple)) else [results]
        if one_thread is None:
            one_thread = self._one_thread(values)
        self.calls["one_thread"] += one_thread
        return threads.run_graph(run, one_thread, values)


class ShapeKeyedRunner:
    """One graph run group by group, placed bucketed (schedule.py): a static
    CachedOp per shapes of its inputs (recorded or not) once they have come
    twice, the SHAPES_KEPT most recent kept; shapes met once run on one
    CachedOp shared by them. MXNet plans a static CachedOp's memory and
    operators again whenever its input shapes change, at three times the cost
    of a small body's kernels (and making a CachedOp costs four times that);
    bucketed, a body's graph meets a few shapes over any stream of trees. Its
    calls count in the GraphRunner's (`counted`); `on_kept_shapes` and
    `on_new_shapes` count them by whether a kept CachedOp served them."""

    def __init__(self, symbol, inputs, counted):
        self.symbol, self._counted = symbol, counted
        # Parameters and captured arrays keep their shapes: not part of the key.
        self._roles = input_roles(inputs)
        self._varying = dict(self._roles)["data_indices"]
        self._ops = collections.OrderedDict()    # input shapes -> CachedOp
        self._met_once = collections.OrderedDict()   # input shapes -> None
        self._shared = None
        self._read_once = None    # the symbol with its data read once, once made
        self._one_thread = OneThreadChoice(symbol, inputs)
        self.on_kept_shapes = self.on_new_shapes = 0

    @property
    def kept(self):
        return len(self._ops)

    def __call__(self, values):
        shapes = (autograd.is_recording(),) + tuple(
            values[position].shape for position in self._varying)
        op = self._ops.get(shapes)
        if op is not None:
            self._ops.move_to_end(shapes)
            self.on_kept_shapes += 1
        else:
            self.on_new_shapes += 1
            op = self._new_shapes(shapes)
        return self._counted._mxnet(op, values, self._one_thread(values, shapes))

    def _new_shapes(self, shapes):
        if shapes in self._met_once:
            del self._met_once[shapes]
            op = self._ops[shapes] = self._static_op(True, parameters_bound=not shapes[0])
            if len(self._ops) > SHAPES_KEPT:
                self._ops.popitem(last=False)
            return op
        self._met_once[shapes] = None
        if len(self._met_once) > 4 * SHAPES_KEPT:
            self._met_once.popitem(last=False)
        if self._shared is None:
            self._shared = self._static_op(False, parameters_bound=False)
        return self._shared

    def _static_op(self, static_shape, parameters_bound):
        """A static CachedOp; with `parameters_bound` (inference on planned shapes),
        read_once.planned_op's, the graph read once for all of its shapes (a
        rewrite costs about 1.6 ms: made per shape, the corpus's Tree-LSTM rewrote
        its graphs 71 times in 1,000 calls, 13 once per graph)."""
        if parameters_bound:
            if self._read_once is None:
                self._read_once = read_once(self.symbol, dict(self._roles)["data_indices"])
            return mx.nd.CachedOp(self._read_once, flags=planned_flags(self._roles))
        return mx.nd.CachedOp(self.symbol, flags=[("static_alloc", True),
                                                  ("static_shape", static_shape)])


class OneThreadChoice:
    """Whether a graph (`symbol` reading `inputs`) runs on one OpenMP thread for
    its input values: for inference, where every array it reads, makes or
    returns holds at most threads.SMALL_ARRAY elements (on the CPU, where serial
    graphs run); chosen once per shapes of its data inputs (parameters keep
    theirs), for the SHAPES_KEPT most recent. A recorded graph runs on the
    engine's team: its backward runs there anyway, and training steps of the
    tree models measured no gain (docs/guide/recursion.md)."""

    def __init__(self, symbol, inputs):
        self.symbol = symbol
        self._varying = dict(input_roles(inputs))["data_indices"]
        self._small = collections.OrderedDict()   # data input shapes -> bool

    def __call__(self, values, key=None):
        """`key`: the data inputs' shapes, or anything that determines them."""
        if not values or autograd.is_recording() or not threads.serial_graphs_available():
            return False
        if key is None:
            key = tuple(values[position].shape for position in self._varying)
        small = self._small.get(key)
        if small is None:
            largest = largest_array(self.symbol, [value.shape for value in values]) \
                if values[0].context.device_type == "cpu" else None
            small = self._small[key] = largest is not None and largest <= threads.SMALL_ARRAY
            if len(self._small) > SHAPES_KEPT:
                self._small.popitem(last=False)
        return small


def largest_array(symbol, input_shapes):
    """The elements of the largest array `symbol` reads, makes or returns when its
    inputs (symbol.list_inputs()) have `input_shapes`; None where MXNet cannot
    infer every shape."""
    named = dict(zip(symbol.list_inputs(), input_shapes))
    try:
        inferred = symbol.get_internals().infer_shape_partial(**named)
    except mx.base.MXNetError:
        return None
    arrays = [shape for shapes in inferred for shape in shapes or ()] + list(input_shapes)
    if not inferred[1] or any(not shape or 0 in shape for shape in arrays):
        return None
    # math.prod: numpy's prod costs microseconds a shape, most of the choice.
    return max(math.prod(shape) for shape in arrays)


class _Constants:
    """Runs a graph without inputs (what it computes has no gradient)."""

    def __init__(self, symbol):
        self.symbol = symbol

    def __call__(self):
        with autograd.pause():
            return self.symbol.eval(ctx=mx.context.current_context())


def index_array(indices):
    """The call's row indices (np.int32) as an NDArray (host_array)."""
    return host_array(indices) if indices.size else None


def _rows(index, group):
    """The (blocks, nodes) matrix of the row indices a group reads: a view into the
    call's index array (made through the C API: the Python slicing and reshaping
    cost ten times more, per group of every call)."""
    part, view = NDArrayHandle(), NDArrayHandle()
    check_call(_LIB.MXNDArraySlice(index.handle, group.start, group.start + group.size,
                                   ctypes.byref(part)))
    try:
        check_call(_LIB.MXNDArrayReshape64(part, 2, (ctypes.c_int64 * 2)(
            group.blocks, group.capacity), False, ctypes.byref(view)))
    finally:
        check_call(_LIB.MXNDArrayFree(part))
    return mx.nd.NDArray(view)


def _stretch(index, start, size):
    """`index[start:start + size]`, a view (made through the C API, as _rows)."""
    part = NDArrayHandle()
    check_call(_LIB.MXNDArraySlice(index.handle, start, start + size, ctypes.byref(part)))
    return mx.nd.NDArray(part)


class ArraysDiffer(Exception):
    """An array a node read is not of the shape or dtype of its body's input
    (the compiled walk took it to be, unchecked): the call is walked again."""


def own_value(group, index, shared, joins=None):
    """The group's own input number `index`: an array the body reads whole (an
    array of the Python data, or `shared`[k], the entry's down output k), those
    of its nodes one after the other where it only picks their rows (with
    `joins`, every array of that kind the call's groups pick rows of: CallJoins);
    else the nodes' rows stacked (stacked_own), an index into such an array
    moved to the rows of its node's array."""
    body = group.body
    if body.kinds[index] == WHOLE:
        if joins is not None and index in group.graph.gathered:
            return joins.joined(group, index, shared)
        values = [shared[value.index] if isinstance(value, Passed) else value
                  for value in distinct_arrays(group.invocations, index)]
        return values[0] if len(values) == 1 else mx.nd.concat(*values, dim=0)
    if index in group.host_values:
        return group.host_values[index]
    return stacked_own(group, index, _starts_of(group, index, joins))


def _starts_of(group, index, joins=None):
    """For own input `index` where it indexes an array the group gathers, per row
    where its node's array starts in the array the group reads (CallJoins's, or
    _starts); else None."""
    target = group.body.index_inputs.get(index)
    if target is None or target not in group.graph.gathered:
        return None
    return joins.starts(group, target) if joins is not None else _starts(group, target)


class CallJoins:
    """The arrays a call's groups only pick rows of (BatchedGraph.gathered), joined
    once per call: every such array of the call with the same row shape and dtype
    (the sentences of a tree pair), one after the other (placed bucketed, with
    `zero_rows`: then zero rows up to a power of two), read by every group that
    gathers from any of them. Joined per group, a call of a Tree-LSTM pair joined
    its two sentences three ways (left, right, both) for a tenth of its time; one
    array also means fewer input shapes for the groups' graphs. Arrays by
    identity: the call holds them until it returns. (Whole-call programs,
    run_program, still join per group: _starts.)"""

    def __init__(self, groups, zero_rows):
        self.zero_rows = zero_rows
        self.members = {}     # (row shape, dtype) -> the call's arrays of that kind, in order
        self.rows = {}        # (row shape, dtype) -> the rows of its arrays together
        self.places = {}      # id(array) -> (its kind, its first row in the kind's joined array)
        self.arrays = {}      # (row shape, dtype) -> the joined array, once made
        for group in groups:
            for index in group.graph.gathered:
                for value in distinct_arrays(group.invocations, index):
                    if id(value) not in self.places:
                        shape = value.shape
                        kind = tuple(shape[1:]), np.dtype(value.dtype).type
                        first = self.rows.get(kind, 0)
                        self.places[id(value)] = kind, first
                        self.rows[kind] = first + shape[0]
                        self.members.setdefault(kind, []).append(value)

    def starts(self, group, target):
        """Per row of the group, where its node's array of own input `target`
        starts in the joined array (the first node's again past its nodes)."""
        rows = [self.places[id(invocation.arrays[target])][1]
                for invocation in group.invocations]
        rows += rows[:1] * (group.capacity - len(rows))
        return np.array(rows, dtype=np.int64)

    def joined(self, group, index, shared):
        """The joined array holding the arrays own input `index` of the group reads."""
        kind = self.places[id(group.invocations[0].arrays[index])][0]
        if kind not in self.arrays:
            values = [shared[value.index] if isinstance(value, Passed) else value
                      for value in self.members[kind]]
            rows = self.rows[kind]
            if self.zero_rows is not None and power_of_two(rows) > rows:
                values.append(self.zero_rows(power_of_two(rows) - rows, kind[0], kind[1]))
            self.arrays[kind] = values[0] if len(values) == 1 else mx.nd.concat(*values, dim=0)
        return self.arrays[kind]


def prepare_host_values(requests, joins=None):
    """Makes the own inputs in `requests` ((group, own index) pairs, a call's)
    that are one-dimensional numpy data (stacked_own's, as own_value gives
    them) into views of one host array per dtype, kept in the groups'
    host_values: an array made through the C API per group and input cost more
    than the Python of the rest of the group's call."""
    chunks, lengths, places = {}, {}, []
    for group, index in requests:
        body = group.body
        if body.kinds[index] == WHOLE or index in group.host_values or \
                not isinstance(group.invocations[0].arrays[index], np.ndarray):
            continue
        data = _numpy_rows(group, index, _starts_of(group, index, joins))
        if data.ndim != 1:
            continue
        start = lengths.get(data.dtype, 0)
        chunks.setdefault(data.dtype, []).append(data)
        lengths[data.dtype] = start + len(data)
        places.append((group, index, data.dtype, start, len(data)))
    arrays = {dtype: host_array(np.concatenate(parts)) for dtype, parts in chunks.items()}
    for group, index, dtype, start, size in places:
        group.host_values[index] = _stretch(arrays[dtype], start, size)


def _starts(group, target):
    """Per row of the group, where its node's array of own input `target` starts
    among the group's arrays one after the other (own_value)."""
    start, starts = 0, {}
    for value in distinct_arrays(group.invocations, target):
        starts[id(value)] = start
        start += value.shape[0]
    rows = [starts[id(invocation.arrays[target])] for invocation in group.invocations]
    rows += rows[:1] * (group.capacity - len(rows))
    return np.array(rows, dtype=np.int64)


def stacked_own(group, index, starts=None):
    """The group's own arrays number `index` (or numpy data, from numbers of the
    structure, plus `starts` if given) along axis 0, the first node's again on
    the rows past its nodes (its capacity), checked against the body's input:
    each node's array has the body's shape and dtype, whose leading axis is 1
    when the group has several rows, exactly when the stacked array has the
    shape of that many rows (concat refuses inputs whose other axes, rank or
    dtype differ)."""
    if isinstance(group.invocations[0].arrays[index], np.ndarray):
        return host_array(_numpy_rows(group, index, starts))
    arrays = _rows_of_own(group, index)
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


def _rows_of_own(group, index):
    """The nodes' values of own input `index`, the first node's again on the rows
    past its nodes (its capacity)."""
    values = [invocation.arrays[index] for invocation in group.invocations]
    return values + values[:1] * (group.capacity - len(values))


def _numpy_rows(group, index, starts):
    """stacked_own's numpy data: the nodes' data of own input `index` one after
    the other (_rows_of_own), plus `starts` if given."""
    data = np.concatenate(_rows_of_own(group, index))
    return data if starts is None else data + starts


def run_program(runner, schedule, zeros_of):
    """Runs the whole call as one program (`runner` calls its CallProgram);
    returns the entry's outputs. `zeros_of(arena)` gives an arena's first arrays."""
    groups, index = schedule.groups, index_array(schedule.indices)
    prepare_host_values([(groups[source.group], source.index) for source in runner.inputs
                         if type(source) is GroupOwn])
    values = []
    for source in runner.inputs:
        kind = type(source)
        if kind is GroupRows:
            values.append(_rows(index, groups[source.group]))
        elif kind is GroupOwn:
            values.append(own_value(groups[source.group], source.index, None))
        elif kind is ArenaStart:
            values.append(zeros_of(source.arena)[source.index])
        else:
            values.append(source.value(None, None))
    return runner(values)


def run_groups(schedule, zeros_of, runner_of, zero_rows=None):
    """Runs the schedule group by group; returns the entry's outputs.
    `runner_of(graph)` gives the runner of a BatchedGraph. With
    `zero_rows(rows, row shape, dtype)` (read-only zeros) the schedule is
    placed bucketed: the arenas start at their rows, and each graph writes into
    them (BatchedGraph.scattered)."""
    arenas, shared, index = {}, None, index_array(schedule.indices)
    joins = CallJoins(schedule.groups, zero_rows)

    def arena_start(arena):
        rows = schedule.arena_rows.get(arena) if zero_rows is not None else None
        return list(zeros_of(arena)) if rows is None else [
            zero_rows(rows, *row_shape) for row_shape in arena.row_shapes()]

    def sources(graph):
        return graph.inputs if zero_rows is None else graph.scattered()[1]

    prepare_host_values([(group, source.index) for group in schedule.groups
                         for source in sources(group.graph) if type(source) is OwnInput], joins)
    for group in schedule.groups:
        graph = group.graph
        values = []
        for source in sources(graph):
            kind = type(source)
            if kind is ArenaInput:
                if source.arena not in arenas:
                    arenas[source.arena] = arena_start(source.arena)
                values.append(arenas[source.arena][source.index])
            elif kind is RowsInput:
                values.append(_rows(index, group))
            elif kind is OwnInput:
                values.append(own_value(group, source.index, shared, joins))
            elif kind is SharedInput:
                values.append(shared[source.index])
            elif kind is WrittenRowsInput:
                values.append(_stretch(index, *group.written[source.write]))
            else:
                values.append(source.value(None, None))
        results = runner_of(graph)(values)
        if graph.writes is not None:
            for (arena, k), value in zip(graph.writes, results):
                if arena not in arenas:
                    arenas[arena] = arena_start(arena)
                arenas[arena][k] = value
        elif graph.stage == DOWN:
            shared = results      # the entry's down stage: arrays every node may read
    return results
