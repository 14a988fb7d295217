"""hybridize(dynamic=True, backend="tvm"): inference runs of traced graphs through TVM.

A traced graph's inference calls (autograd not recording) run as a
tvm_bridge.SegmentedGraph: the graph is split into segments TVM can compile and
segments MXNet runs, each TVM segment kept only where it measured faster than
MXNet. A plan is built after the first inference call with each set of input
shapes (at most MAX_PLANS per graph) has run in MXNet with every guard holding,
from that call's inputs: building runs the graph on them (to type the values
after _cond/_while_loop, and to time the segments), which must not be a run
whose guards fail. Training calls keep MXNet's CachedOp, and its backward. A
graph TVM cannot serve runs in MXNet, with the reason in the block's report.
"""
import warnings

from mxnet import autograd

from ..origin import user_stacklevel
from .capture import ParameterInput

MAX_PLANS = 8


class TvmBackend:
    def __init__(self, **options):
        import tvm_bridge  # imported only when asked for: TVM takes a second to load
        self._segmented_graph = tvm_bridge.SegmentedGraph
        self.options = options
        self.failures = []   # why graphs (or shapes) run in MXNet instead

    def plan_for(self, executor, inputs):
        """The SegmentedGraph that runs `executor`'s graph on `inputs`, or None for MXNet."""
        if autograd.is_recording():
            return None
        return executor.tvm_plans.get(_shapes_key(executor, inputs))

    def after_mxnet_run(self, executor, inputs):
        """`executor`'s graph ran in MXNet on `inputs` and its guards held: build the
        plan for these input shapes, if none was tried yet."""
        if autograd.is_recording():
            return
        key = _shapes_key(executor, inputs)
        if key not in executor.tvm_plans and len(executor.tvm_plans) < MAX_PLANS:
            capture = executor.capture
            parameters = [name for name, source in zip(capture.symbol.list_inputs(),
                                                       capture.inputs)
                          if isinstance(source, ParameterInput)]
            executor.tvm_plans[key] = self._build(capture.symbol, inputs, parameters)

    def symbolic_plan(self, symbol, inputs, symbolic_dims):
        """A plan for `symbol` on inputs shaped like `inputs` except in the
        `symbolic_dims` ({input name: {axis: dim name}}), or None (MXNet runs it)."""
        return self._build(symbol, inputs, symbolic_dims=symbolic_dims)

    def _build(self, symbol, inputs, parameters=(), symbolic_dims=None):
        try:
            # `parameters` change only when trained or set: their preparation
            # (transposes, packing) runs then, not on every call.
            plan = self._segmented_graph(symbol, symbol.list_inputs(), inputs,
                                         parameter_names=list(parameters),
                                         symbolic_dims=symbolic_dims, **self.options)
            # The graph cache (or the recursion engine) guarantees the input shapes and
            # dtypes the plan was built for.
            plan.check_inputs = False
            return plan
        except Exception as error:  # noqa: BLE001 - MXNet runs what TVM cannot
            reason = "%s: %s" % (type(error).__name__, error)
            self.failures.append(reason)
            warnings.warn("gluon_dyn: a graph runs in MXNet, not TVM: " + reason,
                          stacklevel=user_stacklevel())
            return None

    def report(self, executors):
        """Per cached graph, per input shapes: where each segment ran and its times."""
        return {"plans": [plan.report() for executor in executors
                          for plan in executor.tvm_plans.values() if plan],
                "failures": list(self.failures)}


def _shapes_key(executor, inputs):
    # A graph traced for exact shapes only ever sees those: one plan, no key.
    return None if executor.capture.exact else tuple((array.shape, array.dtype)
                                                     for array in inputs)
