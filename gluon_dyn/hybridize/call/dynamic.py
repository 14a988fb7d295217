"""`hybridize(dynamic=True)` on Gluon blocks: imperative Python control flow, run as graphs.

The block's forward is converted (transpiler.py) and replaced by a BlockRunner
(runner.py), which keys each call (cache_key.py), traces graphs (capture.py),
runs them (executor.py), guards its assumptions and falls back to Python where a
graph cannot reproduce the program; `methods=("neg_log_likelihood",)` gives other
methods of the block runners of their own (methods.py). patches.py wraps Gluon's
`hybridize` with `with_dynamic`.
"""
import functools

from mxnet import gluon

from . import methods as block_methods
from ..capturing.python_state import block_tree
from .runner import BlockRunner
from ..capturing.weak_binding import scope_without_cycle


def with_dynamic(hybridize):
    """Gluon's `hybridize`, taking the keyword arguments of the dynamic mode."""
    @functools.wraps(hybridize)
    def wrapper(self, active=True, *args, dynamic=False, methods=(), profile_calls=3,
                speculate=True, max_guard_failures=1, check_speed=None, backend="mxnet",
                backend_options=None, batch_calls=False, **kwargs):
        if methods and not (dynamic and active):
            raise ValueError("hybridize(methods=%r) runs methods on graphs with dynamic=True "
                             "(and active=True)" % (methods,))
        if isinstance(vars(self).get("forward"), BlockRunner):
            del self.forward
        block_methods.remove(self)
        result = hybridize(self, active, *args, **kwargs)
        if dynamic and active:
            options = dict(profile_calls=profile_calls, speculate=speculate,
                           max_guard_failures=max_guard_failures, check_speed=check_speed,
                           backend=backend, backend_options=backend_options)
            self.forward = BlockRunner(self, batch_calls=batch_calls, **options)
            block_methods.install(self, methods, options, self.forward.lock)
            # Calls go through the runner; imperative runs (profiling, fallback) must
            # reach hybrid_forward rather than Gluon's own cached graph.
            if isinstance(self, gluon.HybridBlock):
                self._active = False
            for child in _children_run_as_written(self):
                child._active = False
            for node in block_tree(self):
                scope_without_cycle(node)
        return result
    return wrapper


def _children_run_as_written(block):
    """The HybridBlocks below `block`, which run their code as written whenever the
    block runs as Python (profiling, fallback), exactly as without hybridize. Gluon
    serves a hybridized block from the graph its first call traced: Python control
    flow in it (`if autograd.is_training():`, GluonCV's YOLO output layers) and
    state it keeps (ZoneoutCell's previous output) would be frozen there, and its
    CachedOp refuses arrays MXNet's operators take (a batch in shared memory)."""
    return [child for child in block_tree(block)[1:] if isinstance(child, gluon.HybridBlock)]


def runner_of(block):
    """The BlockRunner of a block hybridized with dynamic=True."""
    runner = vars(block).get("forward")
    if not isinstance(runner, BlockRunner):
        raise ValueError("%s was not hybridized with dynamic=True" % type(block).__name__)
    return runner


def report(block):
    """What `hybridize(dynamic=True)` did with `block`: its forward's runner's report,
    and under "methods" the report of each method hybridized with `methods=`
    ({name: report}, each with the keys below).

    A dict: "converted" (the functions converted), "cached_graphs" and "traces"
    (graphs kept, and traced so far), "fallback" (why the block runs as Python, or
    None), "child_runners" ({child block's name: its report}: a block whose whole
    forward runs as Python gives its child blocks runners of their own, and a call
    whose children ran on their graphs counts as served by graphs, "child_graphs"),
    "internal_errors" (traces stopped by a gluon_dyn bug), "calls" (how calls
    were served: counts per kind, the share served by graphs after profiling, and
    "last": "graph" when the latest call ran on a graph), "deferred_state" (numbers
    on blocks the graphs take and give back, and lists and dicts on blocks they update
    after each run; those the forward also reads stay in the key), "guard_failures"
    (speculative assumptions that failed), "statements" ({"file:line": "if: cond
    (graph)", ...}: what each converted statement became), "not_speculated"
    (locations whose assumptions kept failing, so no longer made), "cache_misses"
    (why recent calls needed a new graph) and "speed_check" (with check_speed, the
    default, a graph slower than Python is dropped: the check's state and the median
    milliseconds of the graph and of the forward as written, from the calls that
    compared them), "partitioned" (per cached graph cut around data-dependent
    shapes, its parts for inference and for recorded runs: kind, ops, CachedOps
    built, calls), "inference_graphs" (per graph whose loops over Gluon's RNN cells
    could run as MXNet's RNN operator: the forms measured, unrolled and cells fused,
    which serves and the measurements), "recorded_graphs" (per graph recorded runs ran: the prefixes of
    the Gluon RNN cells run as MXNet's RNN operator, and the weights whose gradients
    are one product of the stacked steps) and "tvm" (under backend="tvm": the
    plans, the plans and TVM functions built so far, and where TVM failed) and
    "batched_calls" (with batch_calls=True: calls deferred, batches run, calls per
    batch, what made batches run, and how each CallBatch's calls were served).
    """
    made = runner_of(block).report()
    made["methods"] = {name: runner.report()
                       for name, runner in sorted(block_methods.runners_of(block).items())}
    return made
