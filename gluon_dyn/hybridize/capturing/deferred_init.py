"""Gluon's deferred initialization, finished while a forward is traced.

A layer made without its input size (`nn.Dense(4)`) gets its parameters' shapes,
and their values, on its first call with arrays. A call traced on Symbols is not
such a call: the graph would read parameters that hold nothing. So when traced
code calls a HybridBlock whose parameters wait for their shapes, Gluon's own
shape inference runs first, on arrays shaped like the call's Symbols (the trace
knows their shapes), and the parameters are initialized as the call as written
would initialize them. A parameter whose shape the trace cannot tell stays
deferred: DeferredParameters makes that call run as written, which initializes it.
"""
import mxnet as mx
from mxnet import gluon

from ...origin import user_location
from . import tracing


class DeferredParameters(Exception):
    """A graph would read parameters Gluon has not initialized yet; the call runs as
    written, which initializes them."""

    def __init__(self, names):
        super().__init__("%s: parameters %s wait for their shapes (deferred initialization)"
                         % (user_location(), ", ".join(names)))
        self.names = names


def deferred(block):
    """The parameters of `block` and its children that wait for their shapes."""
    return [param for param in block.collect_params().values() if param._deferred_init]


def initialize_before_call(block, args):
    """Before traced code calls `block` with `args`: finish the deferred
    initialization of its parameters from the shapes of the arrays and Symbols in
    `args`, where the trace knows them all."""
    waiting = deferred(block) if isinstance(block, gluon.HybridBlock) else []
    if not waiting:
        return
    trace = tracing.current()
    try:
        examples = _examples(args, trace)
    except AttributeError:      # a shape the trace does not know: left deferred
        return
    block._deferred_infer_shape(*examples)
    for param in waiting:
        param._finish_deferred_init()


def _examples(value, trace):
    if isinstance(value, mx.sym.Symbol):
        return mx.nd.zeros(trace.inferred_shape(value))
    if isinstance(value, (list, tuple)):
        return type(value)(_examples(item, trace) for item in value)
    return value


def check_initialized(params):
    """Raise DeferredParameters if any of `params` (a graph's) still waits for its shape."""
    waiting = sorted(param.name for param in params if param._deferred_init)
    if waiting:
        raise DeferredParameters(waiting)
