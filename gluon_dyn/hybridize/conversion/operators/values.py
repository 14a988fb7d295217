"""Values in converted code while tracing: which are tensors, which Python values
are the same, and the run-time shapes of control-flow outputs."""
import mxnet as mx
import numpy as np

from ....origin import caller_location
from ...capturing import tracing
from ...capturing.numpy_interface import as_legacy
from ...capturing.symbolic_shapes import SymbolicDim

NUMBERS = (bool, int, float)
# Python numbers and sizes read from shapes (export): graph loops carry both as tensors.
NUMBERS_AND_SIZES = NUMBERS + (SymbolicDim,)


def graph_constant(array, dtype):
    """A constant of the graph: a NumPy array as an input captured by the trace."""
    return tracing.current().capture(mx.nd.array(array, dtype=np.dtype(dtype)))


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
    """A Python number, or a size read from a shape (export), as a one-element
    tensor (tensors pass through); one standing for an int indexes as an int."""
    if is_symbol(value):
        return value
    if isinstance(value, SymbolicDim):
        return tracing.scalar_index(value.graph_value())
    tensor = mx.sym.full(shape=(1,), val=float(value))
    return tracing.scalar_index(tensor) if is_int(value) else tracing.scalar_float(tensor)


def length_of(symbol):
    """The length of `symbol`'s axis 0, computed when the graph runs, as a one-element
    float32 tensor standing for an int."""
    return tracing.scalar_index(mx.sym.cast(
        mx.sym.slice_axis(mx.sym.shape_array(as_legacy(symbol)), axis=0, begin=0, end=1),
        dtype="float32"))


def is_int(value):
    """A Python int (bools are flags, not indices)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_int_like(value):
    """Whether `value` stands for a Python int in traced code: an int, a size read
    from a shape (export), or a one-element tensor made from ints (as_tensor, graph
    loop counters, ints a graph loop or branch carries, arithmetic on those)."""
    if is_symbol(value):
        return tracing.is_scalar_index(value)
    return is_int(value) or isinstance(value, SymbolicDim)


def is_number_like(value):
    """Whether `value` stands for a Python number in traced code: a number, a size
    read from a shape, or a one-element tensor made from numbers (is_int_like's, and
    floats a graph loop or branch carries, arithmetic on those)."""
    if is_symbol(value):
        return tracing.is_scalar_number(value)
    return isinstance(value, NUMBERS_AND_SIZES)


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
    """Zeros of `symbol`'s shape and dtype, for a branch or loop start where a value
    exists only on the other path (never read there, but MXNet needs matching shapes
    and dtypes). When exporting, shapes are not fixed: zeros like `symbol` itself."""
    trace = tracing.current()
    if trace.export is not None:
        return mx.sym.zeros_like(symbol)
    try:
        return mx.sym.zeros(shape=trace.fixed_shape(symbol),
                            dtype=np.dtype(trace.inferred_dtype(symbol) or np.float32).name)
    except AttributeError:
        raise tracing.FallbackRequired("a value that exists on one path of a branch or loop on "
                                       "a tensor has a shape not known while tracing",
                                       caller_location(depth=3)) from None
