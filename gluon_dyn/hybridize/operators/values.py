"""Values in converted code while tracing: which are tensors, which Python values
are the same, and the run-time shapes of control-flow outputs."""
import mxnet as mx

from ...origin import caller_location
from .. import tracing

NUMBERS = (bool, int, float)


def is_symbol(value):
    return isinstance(value, mx.sym.Symbol)


def same_python_value(a, b):
    if a is b:
        return True
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001 - values without a usable == are not the same
        return False


def as_tensor(value):
    """A Python number as a one-element tensor (tensors pass through)."""
    return value if is_symbol(value) else mx.sym.full(shape=(1,), val=float(value))


def note_shape(output, *sources):
    """Tell the trace the run-time shape of a cond/while_loop `output`, from the
    first of `sources` (values it takes) whose shape is known: later code may
    read it (`x.shape`, `x[i]`, `for row in x`), and MXNet cannot infer it."""
    trace = tracing.current()
    if trace is None:   # a cond or while_loop called on Symbols outside a trace
        return

    def shape():
        for source in sources:
            try:
                found = trace.inferred_shape(source) if is_symbol(source) else (
                    (1,) if isinstance(source, NUMBERS) else None)
            except AttributeError:
                continue
            if found is not None:
                return found
        return None
    trace.note_control_flow_shape(output, shape)


def zeros_standing_for(symbol):
    """Zeros of `symbol`'s shape, for a branch or loop start where a value exists only
    on the other path (never read there, but MXNet needs matching shapes). When
    exporting, shapes are not fixed: zeros like `symbol` itself."""
    trace = tracing.current()
    if trace.export is not None:
        return mx.sym.zeros_like(symbol)
    try:
        return mx.sym.zeros(shape=trace.fixed_shape(symbol))
    except AttributeError:
        raise tracing.FallbackRequired("a value that exists on one path of a branch or loop on "
                                       "a tensor has a shape not known while tracing",
                                       caller_location(depth=3)) from None
