"""Checks run once when a hybridized Gluon block builds its cached graph.

At that point the input shapes are known for the first time; see
ops/check.py for what is checked and why. patches.py wraps
`HybridBlock._build_cache` with `check_after_build`.
"""
import functools

from mxnet.gluon.block import _flatten

from .graph_json import holds_ops
from .ops.check import check_cond_branches


def check_after_build(build_cache):
    """HybridBlock._build_cache, then the check of its graph's cond branches."""
    @functools.wraps(build_cache)
    def wrapper(self, *args):
        build_cache(self, *args)
        data, out = self._cached_graph
        if not holds_ops(out, ("_cond",)):
            return
        flat_args, _ = _flatten(args, "input")
        shapes, dtypes = {}, {}
        for symbol, array in zip(data, flat_args):
            if array is not None:
                shapes[symbol.name], dtypes[symbol.name] = array.shape, array.dtype
        for name, param in self.collect_params().items():
            if param.shape and all(param.shape):
                shapes[name], dtypes[name] = param.shape, param.dtype
        check_cond_branches(out, shapes, dtypes)
    return wrapper

