"""hybridize(dynamic=True, backend="tvm"): inference runs of traced graphs through TVM.

A traced graph's inference calls (autograd not recording) run as a
tvm_bridge.SegmentedGraph: the graph is split into segments TVM can compile and
segments MXNet runs (an operator without a converter, a boolean_mask), each TVM
segment kept only where it measured faster than MXNet. A plan is built after the
first inference call of a graph has run in MXNet with every guard holding, from
that call's inputs: building runs the graph on them (to type values MXNet cannot
infer, and to time the segments), which must not be a run whose guards fail. A
graph that serves every size of some argument dims (the shape ladder left them
open) gets one plan with those dims symbolic, and the rows a boolean_mask keeps
are symbolic in every plan, so a new size compiles nothing; where symbolic dims
cannot be had (a graph typed by running), a plan per set of input shapes (at
most MAX_PLANS per graph). Training calls keep MXNet's CachedOp, and its
backward. Where TVM fails (a plan not built, a converter that raises, a segment
that does not compile or run), MXNet runs that work: every failure of the
block's plans is listed in its report, and the first is said as a warning.
"""
from mxnet import autograd

from ..capturing.capture import ParameterInput

MAX_PLANS = 8
EVERY_SIZE = "every size"   # the key of a graph's plan with symbolic dims


class TvmBackend:
    def __init__(self, **options):
        import tvm_bridge  # imported only when asked for: TVM takes a second to load
        from tvm_bridge import failures
        self._segmented_graph = tvm_bridge.SegmentedGraph
        self._failures = failures
        self.options = options
        self.failures = []   # where TVM failed and MXNet runs instead (tvm_bridge/failures.py)
        self._say = failures.warn_first()   # once per block
        self.plans_built = self.functions_built = 0

    def plan_for(self, executor, inputs):
        """The SegmentedGraph that runs `executor`'s graph on `inputs`, or None for MXNet."""
        if autograd.is_recording():
            return None
        plans = executor.tvm_plans
        return plans.get(EVERY_SIZE) or plans.get(_shapes_key(executor, inputs))

    def after_mxnet_run(self, executor, inputs):
        """`executor`'s graph ran in MXNet on `inputs` and its guards held: build the
        plan for these inputs (for every size of its open dims), if none was tried yet."""
        if autograd.is_recording():
            return
        capture, plans = executor.capture, executor.tvm_plans
        parameters = [name for name, source in zip(capture.symbol.list_inputs(), capture.inputs)
                      if isinstance(source, ParameterInput)]
        # The plan is measured against the graph MXNet served (its cells fused, if
        # that measured faster), which serves calls where the plan is slower.
        whole = executor.inference_graph()
        if executor.symbolic_dims and EVERY_SIZE not in plans:
            plans[EVERY_SIZE] = self._build(capture.symbol, inputs, parameters, whole,
                                            executor.symbolic_dims, "a plan per input shapes")
            if plans[EVERY_SIZE] is not None:
                return
        key = _shapes_key(executor, inputs)
        if key not in plans and len(plans) < MAX_PLANS:
            plans[key] = self._build(capture.symbol, inputs, parameters, whole)

    def symbolic_plan(self, symbol, inputs, symbolic_dims):
        """A plan for `symbol` on inputs shaped like `inputs` except in the
        `symbolic_dims` ({input name: {axis: dim name}}), or None (MXNet runs it)."""
        return self._build(symbol, inputs, symbolic_dims=symbolic_dims)

    def _build(self, symbol, inputs, parameters=(), whole=None, symbolic_dims=None,
               instead="MXNet"):
        """The plan, or None: then `instead` runs the graph (said once, with why)."""
        try:
            # `parameters` change only when trained or set: their preparation
            # (transposes, packing) runs then, not on every call.
            plan = self._segmented_graph(symbol, symbol.list_inputs(), inputs,
                                         parameter_names=list(parameters),
                                         symbolic_dims=symbolic_dims, whole_symbol=whole,
                                         on_failure=self._failed, **self.options)
            # The graph cache (or the recursion engine) guarantees the input shapes and
            # dtypes the plan was built for.
            plan.check_inputs = False
            self.plans_built += 1
            self.functions_built += sum(step.function is not None for step in plan.steps)
            return plan
        except Exception as error:  # noqa: BLE001 - MXNet runs what TVM cannot
            failures = self._failures
            what = ("building a plan" if symbolic_dims is None else
                    "building a plan with symbolic dims %s" % symbolic_dims)
            self._failed(failures.failure(failures.PLAN, what, failures.describe(error),
                                          "%s runs the graph" % instead))
            return None

    def _failed(self, record):
        self.failures.append(record)
        self._say(record)

    def report(self, executors):
        """Per cached graph, per input shapes: where each segment ran and its times;
        the plans and compiled TVM functions built so far (for every graph); and
        "failures": where TVM failed and what runs instead ({"stage": "plan",
        "converter", "compile" or "run", "what", "why", "instead"})."""
        return {"plans": [plan.report() for executor in executors
                          for plan in executor.tvm_plans.values() if plan],
                "plans_built": self.plans_built, "functions_built": self.functions_built,
                "failures": list(self.failures)}


def _shapes_key(executor, inputs):
    # A graph traced for exact shapes only ever sees those: one plan, no key.
    return None if executor.capture.exact else tuple((array.shape, array.dtype)
                                                     for array in inputs)
