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
from . import guards
from .python_state import owner_of, tensor_attributes


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
        # Inference runs with memory (and shapes, if exact) planned once. Recorded
        # runs use a CachedOp without static_alloc: with it MXNet 1.9.1 computes
        # wrong input gradients for some graphs (tests/test_generated_programs.py,
        # "static_alloc backward").
        self._inference_op = mx.nd.CachedOp(capture.symbol, flags=_inference_flags(capture))
        self._recording_op = None

    def run(self, block, args):
        capture = self.capture
        states = tensor_attributes(block) if capture.reads_state else None
        inputs = [source.value(args, states) for source in capture.inputs]
        plan = self.tvm.plan_for(self, inputs) if self.tvm is not None else None
        results = plan(*inputs) if plan is not None else self._cached_op()(*inputs)
        results = list(results) if isinstance(results, (list, tuple)) else [results]
        if capture.guards:
            failed = guards.failed(capture.guards, results.pop().asnumpy())
            if failed:
                return Run(failed_guards=tuple(failed))
        position = capture.num_outputs
        for write in capture.state_writes:
            owner, attr = owner_of(block, write.path)
            setattr(owner, attr, write.rebuild(results[position:position + write.count]))
            position += write.count
        if plan is None and self.tvm is not None:
            self.tvm.after_mxnet_run(self, inputs)
        outputs = results[:capture.num_outputs]
        return Run(outputs[0] if capture.out_format is None else outputs)

    def _cached_op(self):
        if not autograd.is_recording():
            return self._inference_op
        if self._recording_op is None:
            self._recording_op = mx.nd.CachedOp(self.capture.symbol)
        return self._recording_op


def _inference_flags(capture):
    """Memory is planned once per graph; shapes too when the graph serves one set of
    input shapes (`exact`) and MXNet can infer all of them before it runs."""
    flags = [("static_alloc", True)]
    if capture.exact and not graph_json.holds_ops(capture.symbol, graph_json.UNINFERABLE_OPS):
        flags.append(("static_shape", True))
    return flags
