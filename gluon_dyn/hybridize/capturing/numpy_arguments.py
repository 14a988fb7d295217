"""NumPy arrays among a forward's arguments: graph inputs, converted where the code converts them.

Code written for NDArrays is often given NumPy arrays (token ids, lengths, a
batch from a NumPy pipeline) that it turns into arrays itself: `nd.array(x)`,
`nd.array(x, dtype="int32")`, `y[:] = x`. Such an argument is a graph input, like
an NDArray (arguments.py: its shape and dtype key the graph, not its values);
while tracing, the code holds a NumpyArgument standing for it, whose shape, ndim,
size, dtype and len() it may read, and which `nd.array` (operators/
ndarray_functions.py) and item assignment (operators/item_assignment.py) turn into
the array NDArray would make: the input cast to the dtype asked (float32 unless
said otherwise, as `nd.array` does). Anything that reads its values in Python
(NumPy arithmetic, indexing, iteration, `np.asarray`) stops the trace at that
statement, which then runs as Python with the real array (a graph break).
"""
import numpy as np

from ...origin import user_location
from . import tracing


class NumpyArgument:
    """A NumPy array argument while tracing: `symbol` is its graph input."""
    __slots__ = ("symbol",)

    def __init__(self, symbol):
        self.symbol = symbol

    @property
    def __class__(self):
        # `isinstance(x, np.ndarray)` holds, as for the array it stands for.
        return np.ndarray

    @property
    def shape(self):
        return tracing.current().static_shape(self.symbol)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return int(np.prod(self.shape))

    @property
    def dtype(self):
        return np.dtype(tracing.current().dtypes[self.symbol.name])

    def __len__(self):
        return self.shape[0]

    def values_needed(self, use):
        """The graph break for a use that needs the array's values in Python."""
        return tracing.FallbackRequired(
            "%s reads the values of a NumPy array argument in Python, so the statement runs "
            "as Python" % use, user_location(), breakable=True)

    def __getattr__(self, name):
        raise self.values_needed("`.%s`" % name)

    def _in_python(use):  # noqa: N805 - builds methods below
        def method(self, *args, **kwargs):
            raise self.values_needed(use)
        return method

    __array__ = _in_python("making a NumPy array of it")
    __getitem__ = __setitem__ = __iter__ = __contains__ = _in_python("indexing or iterating it")
    __bool__ = __int__ = __float__ = __index__ = _in_python("converting it to a number")
    __str__ = __repr__ = __format__ = _in_python("turning it into text")
    __hash__ = _in_python("hashing it")
    for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and",
                  "or", "xor", "lt", "le", "gt", "ge", "eq", "ne", "neg", "pos", "abs",
                  "invert"):
        locals()["__%s__" % _name] = _in_python("NumPy's `%s`" % _name)
        locals()["__r%s__" % _name] = _in_python("NumPy's `%s`" % _name)
    del _in_python, _name


def is_numpy_argument(value):
    return isinstance(value, NumpyArgument)
