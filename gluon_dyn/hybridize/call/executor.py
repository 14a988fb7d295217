"""Stage 3 of a call: running a Capture's graph.

Inputs are bound from their sources, the graph runs (an MXNet CachedOp; a graph
with a data-dependent shape at its top level cut around it, cut_graph.py; or a
TVM plan under backend="tvm"), the guard vector is read and every failed guard named
by its position, and only when every guard held are the arrays kept on blocks
written back and the outputs returned.
"""
import dataclasses

import mxnet as mx
from mxnet import autograd

from ... import graph_json, random_states
from ...training import wide_steps
from ...ops.gradient_flow import has_history
from ..capturing import arguments, guards
from ..passes import pipeline
from ..passes.read_once import planned_op
from . import stale_gradients
from ..timing.graph_choice import MeasuredGraphs
from ..capturing.capture import ArgumentInput, ParameterInput, input_roles
from ..partition.cut_graph import CutGraph
from ..capturing.outputs import arrays_layout, rebuild_outputs
from ..recursion.output_type import output_type
from .call_batch import flattened
from ..capturing.python_state import owner_of


RETURNED_TYPES_KEPT = 16   # argument structures whose results' types a graph keeps


@dataclasses.dataclass
class Run:
    """A run's result: the forward's outputs, or the guards that failed (then nothing
    was written back and the outputs are not to be used)."""
    outputs: object = None
    failed_guards: tuple = ()


class GraphExecutor:
    def __init__(self, capture, training, tvm=None, open_dims=None, cells=None):
        """`training`: autograd's training mode of the calls it serves (their cache
        key's); `open_dims` ({argument array index: dims}): the dims whose every size
        the graph serves (its cache key leaves them open); `cells`: the block's RNN
        cells MXNet's RNN operator computes (fused_cells.cells_of)."""
        self.capture = capture
        self.training = training
        # Per graph input: its source, and the Parameter it reads, if it reads one
        # directly (`_inputs`).
        self._sources = [(source, source.parameter if isinstance(source, ParameterInput) and
                          source.parameter._stype == "default" else None)
                         for source in capture.inputs]
        self._reads_state = capture.reads_state
        self.cells = cells or {}
        self.tvm = tvm            # tvm_backend.TvmBackend, or None
        self.tvm_plans = {}       # input shapes -> tvm_bridge.SegmentedGraph (None: failed)
        # The open dims by graph input name, as a plan's symbolic dims.
        self.symbolic_dims = {
            name: {axis: "data%d_d%d" % (source.index, axis)
                   for axis in sorted(open_dims[source.index])}
            for name, source in zip(capture.symbol.list_inputs(), capture.inputs)
            if isinstance(source, ArgumentInput) and source.index in (open_dims or {})}
        # Memory (and shapes, if exact) is planned once, for inference and recorded
        # runs alike. A recorded run's graph reads no node output often enough for
        # MXNet 1.9.1's planned backward to sum its gradients in place, which some
        # operators get wrong (gradient_sums.py). Each call gets new output arrays,
        # and a recorded call keeps its planned memory until its backward (MXNet
        # plans another for a call made meanwhile).
        # A graph with an operator whose output shape depends on the data
        # (boolean_mask) runs cut around it (cut_graph.py). It waits for its own
        # nodes' shapes anyway: waiting for its outputs too makes a failure (a Dense
        # on a mask that kept no rows) the call's, where the runner raises it as the
        # forward as written does.
        self._cut = graph_json.holds_ops(capture.symbol, graph_json.DATA_DEPENDENT_SHAPE_OPS,
                                         nested=False)
        self._waits = self._cut or graph_json.holds_ops(
            capture.symbol, graph_json.DATA_DEPENDENT_SHAPE_OPS)
        # Otherwise the CachedOps are made at the first run that needs them, from
        # the graph as `_graph` rewrites it for the run's input shapes.
        self._inference_op = CutGraph(capture.symbol) if self._cut else None
        self.mxnet_graph = None     # the graph its CachedOps run, once made
        self.inference_forms = None   # MeasuredGraphs, where its cells could be fused
        self.recording_graph = None     # the graph of its recorded runs, once made
        self.fused_cells = []       # prefixes of the cells its recorded runs fuse
        self.stacked_weights = []   # weights whose gradients its recorded runs stack
        self._recording_op = None
        self._random_draws = None       # whether its runs draw random numbers (_draws_random)
        self._returned_arrays_type = None
        # Argument structure -> the (shape, dtype, context) of each array a run on
        # such arguments returned (call_batching.py: results known before a run).
        self.returned_types = {}

    def returned_arrays_type(self):
        """The OutputType of a run's result, if the forward returns arrays only (in
        lists and tuples) and has no other effect a later line could see (state
        written on blocks, arguments changed, running statistics updated, arrays
        without autograd history, the numpy interface's arrays); else None."""
        if self._returned_arrays_type is None:
            capture, returned = self.capture, None
            if not (capture.writes or capture.argument_writes or capture.numpy_outputs or
                    capture.untracked_outputs or capture.conditional_parameters or
                    capture.symbol.list_auxiliary_states()):
                returned = arrays_layout(capture.out_format)
            self._returned_arrays_type = (False if returned is None else
                                          output_type(returned[0], [((), None)] * returned[1]))
        return self._returned_arrays_type or None

    def note_returned(self, structure, result):
        """Keeps the types of the arrays `result` (a run's, on arguments of
        `structure`) holds, if the forward returns arrays only; its shapes do not
        depend on the data (no boolean_mask)."""
        if not self._waits and structure not in self.returned_types and \
                len(self.returned_types) < RETURNED_TYPES_KEPT and \
                self.returned_arrays_type() is not None:
            self.returned_types[structure] = [(array.shape, array.dtype, array.context)
                                              for array in flattened(result)]

    def run(self, block, args):
        capture = self.capture
        inputs = self._inputs(args, _StateAttributes(block) if self._reads_state else None)
        plan = self.tvm.plan_for(self, inputs) if self.tvm is not None else None
        states = random_states.saved() if capture.guards and self._draws_random() else None
        wide_steps.graph_runs(inputs)
        results = plan(*inputs) if plan is not None else self._cached_op(inputs)(*inputs)
        results = list(results) if isinstance(results, (list, tuple)) else [results]
        if self._waits:
            for result in results:
                result.wait_to_read()
        if capture.guards:
            failed = guards.failed(capture.guards, results.pop().asnumpy())
            if failed:
                if states is not None:     # Python runs the call again: it draws anew
                    random_states.restore(states)
                return Run(failed_guards=tuple(failed))
        if capture.conditional_parameters:
            paths_ran = results.pop()
            if autograd.is_recording():
                ran = paths_ran.asnumpy()
                stale_gradients.note_run(
                    [p for p, flag in zip(capture.conditional_parameters, ran) if flag],
                    [p for p, flag in zip(capture.conditional_parameters, ran) if not flag])
        if capture.untracked_outputs and autograd.is_recording():
            results = _without_untracked_history(capture, inputs, results)
        results = [result.as_np_ndarray() if i in capture.numpy_outputs else result
                   for i, result in enumerate(results)]
        position = capture.num_outputs
        for write in capture.writes:
            write.apply(block, results[position:position + write.count])
            position += write.count
        if plan is None and self.tvm is not None:
            self.tvm.after_mxnet_run(self, inputs)
        outputs = results[:capture.num_outputs]
        mutables = [arguments.get(args, path) for path in capture.mutable_paths]
        for write in capture.argument_writes:
            write.apply(mutables, outputs)
        return Run(rebuild_outputs(capture.out_format, outputs, mutables))

    def _draws_random(self):
        if self._random_draws is None:
            self._random_draws = random_states.draws(self.capture.symbol, self.training)
        return self._random_draws

    def lane(self, args):
        """An ExecutorLane: run() for inference calls whose arrays are shaped as
        `args`'s, where they run on a TVM plan with a PlanLane and the capture has
        nothing to do after its graph (no guards, writes, argument changes, numpy
        outputs, nothing waited for); else None."""
        capture = self.capture
        if self.tvm is None or self._waits or self._reads_state or capture.guards or \
                capture.conditional_parameters or capture.numpy_outputs or capture.writes or \
                capture.argument_writes or capture.mutable_paths or autograd.is_recording():
            return None
        plan = self.tvm.plan_for(self, self._inputs(args, None))
        plan_lane = plan.lane() if plan is not None else None
        return ExecutorLane(self, plan_lane, args) if plan_lane is not None else None

    def _inputs(self, args, states, arguments_as_given=False):
        """The graph's inputs for a call; its arguments as given where
        `arguments_as_given` (not as ArgumentInput makes them: NDArrays outside
        shared memory, which it would give as they are). A parameter's array is read
        as Parameter.data() gives it where it has one (initialized on one context): a
        call reads every parameter of the model (260 for a MobileNetV2), and
        data()'s checks cost more than the array it returns."""
        inputs = []
        for source, parameter in self._sources:
            if parameter is None:
                inputs.append(arguments.get(args, source.path) if arguments_as_given and
                              isinstance(source, ArgumentInput) else source.value(args, states))
                continue
            arrays = parameter._data      # pylint: disable=protected-access
            inputs.append(arrays[0] if arrays is not None and len(arrays) == 1
                          else parameter.data())
        return inputs

    def recording_report(self):
        """What the graph of recorded runs computes differently, or None before one ran."""
        if self.recording_graph is None:
            return None
        return {"fused_cells": list(self.fused_cells),
                "stacked_weights": list(self.stacked_weights)}

    def inference_report(self):
        """The forms of the inference graph measured against each other (unrolled,
        cells fused), or None where it has one form or has not run."""
        return self.inference_forms.report() if self.inference_forms else None

    def partition_report(self):
        """The parts of a graph cut around its data-dependent shapes, for inference and
        for recorded runs (None where not run yet); None for a graph not cut."""
        if not self._cut:
            return None
        return {"inference": self._inference_op.report(),
                "recording": self._recording_op.report() if self._recording_op else None}

    def _cached_op(self, inputs):
        if not autograd.is_recording():
            if self._inference_op is None:
                self._inference_op = self._inference(inputs)
            return self._inference_op
        if self._recording_op is None:
            if self._cut:
                self._recording_op = CutGraph(self.capture.symbol, recording=True)
            else:
                self._recording_op = self._recording(inputs)
        return self._recording_op

    def _inference(self, inputs):
        """The inference graph's CachedOp; for a graph traced for exact shapes with
        loops over Gluon's cells, that and the graph with the loops as MXNet's RNN
        operator (fused_cells.py), the faster by measurement serving (graph_choice.py)."""
        def planned(graph):
            return self._taking_capture_inputs(_planned_op(graph, self.capture), graph)
        graph = self._graph(inputs)
        if not self.capture.exact:
            return planned(graph)
        run = self._run(inputs, recording=False, fuse_cells=True)
        fused = pipeline.apply(self.capture.symbol, run)
        if not run.fused_prefixes:
            return planned(graph)
        self.inference_forms = MeasuredGraphs({"unrolled": (graph, planned(graph)),
                                               "cells fused": (fused, planned(fused))},
                                              incumbent="unrolled")
        return self.inference_forms

    def inference_graph(self):
        """The inference graph serving MXNet's runs, once one ran."""
        return self.inference_forms.graph if self.inference_forms else self.mxnet_graph

    def _recording(self, inputs):
        """The CachedOp of recorded runs: the capture's graph through the passes
        (pipeline.py) for recorded runs."""
        run = self._run(inputs, recording=True, fuse_cells=True)
        planned = pipeline.apply(self.capture.symbol, run)
        self.fused_cells = run.fused_prefixes
        self.recording_graph = planned
        cached_op = mx.nd.CachedOp(planned, flags=run.flags)
        if run.stacked:     # takes the inputs of the graph it was made from
            self.stacked_weights = [product.weight for product in run.stacked.products]
            return self._taking_capture_inputs(run.stacked.run_with(cached_op),
                                               run.before_stacking)
        return self._taking_capture_inputs(cached_op, planned)

    def _run(self, inputs, recording, fuse_cells):
        """The pipeline.Run of a graph of this capture for `inputs`."""
        names = self.capture.symbol.list_inputs()
        return pipeline.Run(
            recording=recording, training=self.training,
            dtypes={name: array.dtype for name, array in zip(names, inputs)},
            shapes={name: array.shape for name, array in zip(names, inputs)}
            if self.capture.exact else None,
            cells=self.cells, fuse_cells=fuse_cells, flags=_planned_flags(self.capture))

    def _taking_capture_inputs(self, run, graph):
        """`run` (taking `graph`'s inputs, in its order), called with the capture's:
        a rewrite may list a graph's inputs in another order."""
        given, wanted = self.capture.symbol.list_inputs(), graph.list_inputs()
        if given == wanted:
            return run
        order = [given.index(name) for name in wanted]
        return lambda *inputs: run(*[inputs[index] for index in order])

    def _graph(self, inputs):
        """The graph MXNet runs for inference, unrolled (pipeline.py)."""
        if self.mxnet_graph is None:
            self.mxnet_graph = pipeline.apply(
                self.capture.symbol, self._run(inputs, recording=False, fuse_cells=False))
        return self.mxnet_graph


class ExecutorLane:
    """GraphExecutor.run for an inference call that repeats a served one (runner.py),
    through its plan's PlanLane: the outputs, as run() returns them in its Run."""

    def __init__(self, executor, plan_lane, args):
        self._executor, self._plan = executor, plan_lane
        # The calls it serves repeat the call on `args` (RepeatedCall): their arrays
        # are of its arrays' types and contexts, so where those need no conversion to
        # be graph inputs, theirs need none either (nor the look at their contexts).
        self._arguments_as_given = all(
            isinstance(array, mx.nd.NDArray) and array.context.device_type != "cpu_shared"
            for array in flattened(args))

    def ready(self):
        return self._plan.ready()

    def run(self, args):
        executor = self._executor
        capture = executor.capture
        results = self._plan.run(executor._inputs(args, None, self._arguments_as_given))
        return rebuild_outputs(capture.out_format, results[:capture.num_outputs])


class _StateAttributes:
    """The arrays kept on the block tree that graph inputs read, as
    python_state.tensor_attributes gives them (path -> (owner, attribute, value)),
    each looked up by its path: not the whole tree walked at every call."""

    def __init__(self, block):
        self.block = block

    def __getitem__(self, path):
        owner, attr = owner_of(self.block, path)
        return owner, attr, vars(owner)[attr]


def _without_untracked_history(capture, inputs, results):
    """`results` with the outputs computed from constants and captured arrays that
    have no autograd history detached: imperatively MXNet records no operation on
    arrays without history, while a recorded CachedOp gives all its outputs one."""
    arrays = dict(zip(capture.symbol.list_inputs(), inputs))
    untracked = {i for i, names in capture.untracked_outputs.items()
                 if not any(has_history(arrays[name]) for name in names)}
    return [result.detach() if i in untracked else result for i, result in enumerate(results)]


def _planned_flags(capture):
    """Memory is planned once per graph; shapes too when the graph serves one set of
    input shapes (`exact`) and MXNet can infer all of them before it runs. A
    data-dependent shape inside a control-flow node (a mask in a cond's branch)
    makes the whole graph MXNet's dynamic-shape CachedOp, each node's shapes
    inferred right before it runs (static_alloc fails on it when a mask keeps no
    rows)."""
    if graph_json.holds_ops(capture.symbol, graph_json.DATA_DEPENDENT_SHAPE_OPS):
        return []
    flags = [("static_alloc", True)]
    if capture.exact and not graph_json.holds_ops(capture.symbol, graph_json.UNINFERABLE_OPS):
        flags.append(("static_shape", True))
    return flags


def _planned_op(graph, capture):
    """The CachedOp of an inference graph of `capture`: its memory planned, and
    where MXNet plans shapes too (static_shape), the roles of `graph`'s inputs given
    (capture.input_roles) and its data inputs read once (read_once.py)."""
    flags = _planned_flags(capture)
    if ("static_shape", True) not in flags:
        return mx.nd.CachedOp(graph, flags=flags)
    sources = dict(zip(capture.symbol.list_inputs(), capture.inputs))
    return planned_op(graph, input_roles([sources.get(name) for name in graph.list_inputs()]))
