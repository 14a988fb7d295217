"""Host data converted code turns into values that differ from call to call.

A graph replays the operators a trace recorded; whatever Python computed while
tracing is frozen into it. That is right for values of the call's key (Python
values on blocks, the arguments' structure), and wrong for:

- host random numbers (`random.*`, `numpy.random.*`): the trace would draw them
  once, and consume the generator's state a call as written would have consumed;
- arrays made from NumPy data (`mx.nd.array(np_array)`): NumPy arrays are mutable
  and not part of the key, so the array made while tracing would be a constant
  standing for data that changes.

Both stop the trace at the statement (a graph break, graph_breaks.py: the
statement runs as Python on every call, graph segments around it). MXNet's own
random operators (`mx.nd.random.*`) are graph operators and draw on every run.
"""
import random

import numpy as np

from ...origin import caller_location
from . import tracing
from .numpy_arguments import is_numpy_argument

_HOST_RANDOM_MODULES = ("random", "numpy.random")
_ARRAY_MAKERS = ("array", "from_numpy", "asarray")


def check_call(f, args, kwargs):
    """Stop the trace (a graph break) before `f(*args, **kwargs)` if it draws host
    random numbers or makes an array from NumPy data."""
    if _draws_host_random(f):
        raise tracing.FallbackRequired(
            "`%s` draws host random numbers, which a graph would freeze at the values of its "
            "trace; MXNet's random operators (mx.nd.random.*) run in graphs"
            % getattr(f, "__name__", f), caller_location(), breakable=True)
    if getattr(f, "__name__", "") in _ARRAY_MAKERS and _is_mxnet(f) and \
            _holds_numpy(list(args) + list((kwargs or {}).values())):
        raise tracing.FallbackRequired(
            "an array is made from NumPy data, which a graph would freeze at the values of its "
            "trace", caller_location(), breakable=True)


def _draws_host_random(f):
    owner = getattr(f, "__self__", None)
    if isinstance(owner, (random.Random, np.random.RandomState, np.random.Generator)):
        return True
    module = getattr(f, "__module__", None) or ""
    return any(module == name or module.startswith(name + ".") for name in _HOST_RANDOM_MODULES)


def _is_mxnet(f):
    return (getattr(f, "__module__", None) or "").startswith("mxnet")


def _holds_numpy(values, depth=3):
    for value in values:
        # A NumPy argument is a graph input, not data frozen (numpy_arguments.py).
        if isinstance(value, (np.ndarray, np.generic)) and not is_numpy_argument(value):
            return True
        if depth and isinstance(value, (list, tuple)) and _holds_numpy(value, depth - 1):
            return True
    return False
