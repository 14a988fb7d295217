"""Stage 3 of a call: running a Capture's graph.

Inputs are bound from their sources, the graph runs (an MXNet CachedOp, or a TVM
plan under backend="tvm"), the guard vector is read and every failed guard named
by its position, and only when every guard held are the arrays kept on blocks
written back and the outputs returned.
"""
import dataclasses

import mxnet as mx
from mxnet import autograd

from .. import graph_json
from . import gradient_sums, guards, stale_gradients
from .outputs import rebuild_outputs
from .python_state import tensor_attributes


@dataclasses.dataclass
class Run:
    """A run's result: the forward's outputs, or the guards that failed (then nothing
    was written back and the outputs are not to be used)."""
    outputs: object = None
    failed_guards: tuple = ()


class GraphExecutor:
    def __init__(self, capture, tvm=None):
        self.capture = capture
        self.tvm = tvm            # tvm_backend.TvmBackend, or None
        self.tvm_plans = {}       # input shapes -> tvm_bridge.SegmentedGraph (None: failed)
        # Memory (and shapes, if exact) is planned once, for inference and recorded
        # runs alike. A recorded run's graph reads no node output often enough for
        # MXNet 1.9.1's planned backward to sum its gradients in place, which some
        # operators get wrong (gradient_sums.py). Each call gets new output arrays,
        # and a recorded call keeps its planned memory until its backward (MXNet
        # plans another for a call made meanwhile).
        self._inference_op = mx.nd.CachedOp(capture.symbol, flags=_planned_flags(capture))
        # Such a graph waits for its own nodes' shapes anyway: waiting for its outputs
        # too makes a failure (a Dense on a mask that kept no rows) the call's, where
        # the runner raises it as the forward as written does.
        self._waits = graph_json.holds_ops(capture.symbol, graph_json.DATA_DEPENDENT_SHAPE_OPS)
        self._recording_op = None

    def run(self, block, args):
        capture = self.capture
        states = tensor_attributes(block) if capture.reads_state else None
        inputs = [source.value(args, states) for source in capture.inputs]
        plan = self.tvm.plan_for(self, inputs) if self.tvm is not None else None
        results = plan(*inputs) if plan is not None else self._cached_op()(*inputs)
        results = list(results) if isinstance(results, (list, tuple)) else [results]
        if self._waits:
            for result in results:
                result.wait_to_read()
        if capture.guards:
            failed = guards.failed(capture.guards, results.pop().asnumpy())
            if failed:
                return Run(failed_guards=tuple(failed))
        if capture.conditional_parameters:
            paths_ran = results.pop()
            if autograd.is_recording():
                ran = paths_ran.asnumpy()
                stale_gradients.note_run(
                    [p for p, flag in zip(capture.conditional_parameters, ran) if flag],
                    [p for p, flag in zip(capture.conditional_parameters, ran) if not flag])
        position = capture.num_outputs
        for write in capture.writes:
            write.apply(block, results[position:position + write.count])
            position += write.count
        if plan is None and self.tvm is not None:
            self.tvm.after_mxnet_run(self, inputs)
        outputs = results[:capture.num_outputs]
        return Run(rebuild_outputs(capture.out_format, outputs))

    def _cached_op(self):
        if not autograd.is_recording():
            return self._inference_op
        if self._recording_op is None:
            symbol, flags = gradient_sums.planned_recording(self.capture.symbol,
                                                            _planned_flags(self.capture))
            self._recording_op = mx.nd.CachedOp(symbol, flags=flags)
        return self._recording_op


def _planned_flags(capture):
    """Memory is planned once per graph; shapes too when the graph serves one set of
    input shapes (`exact`) and MXNet can infer all of them before it runs. A graph
    with an operator whose output shape depends on the data (boolean_mask) runs
    as MXNet's dynamic-shape CachedOp, each node's shapes inferred right before it
    runs (static_alloc fails on it when a mask keeps no rows)."""
    if graph_json.holds_ops(capture.symbol, graph_json.DATA_DEPENDENT_SHAPE_OPS):
        return []
    flags = [("static_alloc", True)]
    if capture.exact and not graph_json.holds_ops(capture.symbol, graph_json.UNINFERABLE_OPS):
        flags.append(("static_shape", True))
    return flags
