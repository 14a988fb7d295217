"""`hybridize(dynamic=True)` on Gluon blocks: imperative Python control flow, run as graphs.

A plain Block's forward, or a HybridBlock's hybrid_forward methods, are converted
(transpiler.py) and run by a BlockRunner (block_runner.py), which profiles, traces
graphs keyed by what the Python code read, guards its assumptions, and falls back
to Python where a graph cannot reproduce the program.
"""
import functools

from mxnet import gluon

from .block_runner import BlockRunner


def _with_dynamic(hybridize):
    @functools.wraps(hybridize)
    def wrapper(self, active=True, *args, dynamic=False, profile_calls=3, speculate=True,
                max_guard_failures=1, check_speed=None, backend="mxnet", backend_options=None,
                **kwargs):
        if isinstance(vars(self).get("forward"), BlockRunner):
            del self.forward
        result = hybridize(self, active, *args, **kwargs)
        if dynamic and active:
            self.forward = BlockRunner(self, profile_calls=profile_calls, speculate=speculate,
                                       max_guard_failures=max_guard_failures,
                                       check_speed=check_speed, backend=backend,
                                       backend_options=backend_options)
            # Calls go through the runner; imperative runs (profiling, fallback) must
            # reach hybrid_forward rather than Gluon's own cached graph. Children keep
            # theirs.
            if isinstance(self, gluon.HybridBlock):
                self._active = False
        return result
    wrapper.gluon_dyn_wrapped = True
    return wrapper


def report(block):
    """What `hybridize(dynamic=True)` did with `block`.

    A dict: "converted" (the functions converted), "cached_graphs" and "traces"
    (graphs kept, and traced so far), "fallback" (why the block runs as Python, or
    None), "guard_failures" (speculative assumptions that failed) and "statements"
    ({"file:line": "if: cond (graph)", ...}: what each converted statement became),
    "not_speculated" (locations whose assumptions kept failing, so no longer made),
    "cache_misses" (why recent calls needed a new graph) and "speed_check_ms" (median
    times of the graph and of the forward as written, from the calls that compared
    them: with check_speed, the default, a graph slower than Python is dropped).
    """
    runner = vars(block).get("forward")
    if not isinstance(runner, BlockRunner):
        raise ValueError("%s was not hybridized with dynamic=True" % type(block).__name__)
    return runner.report()


for _block_class in (gluon.Block, gluon.HybridBlock):
    if not getattr(_block_class.hybridize, "gluon_dyn_wrapped", False):
        _block_class.hybridize = _with_dynamic(_block_class.hybridize)
