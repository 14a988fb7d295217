"""Host reads kept in the graph, as JANUS keeps Python values from the data as tensors.

Imperative code reads one element of an array into Python (`best =
int(argmax(v).asscalar())`) and often only uses the number to index arrays
(`v[0, best]`), to index a list of such numbers (`backpointers[best]`), in
arithmetic (`vec - max_score`), or to return it (`return score, best_path`).
Traced, such a read gives a HostValue: the element as a one-element float32
Symbol, its gradient blocked (a number read into Python has none), with the Python
type the read gives (numpy.float32 from `asscalar()`, int after `int()`). The
operators of converted code take HostValues where they take numbers: arithmetic
and comparisons give HostValues (arrays, with an array), `int()`, `float()`,
`round()` and `abs()` convert, indexing an array or a list of arrays or numbers by
one gathers in the graph, `isinstance` answers for the number's type, `assert` on
one is a guard (converters/asserts.py); lists, tuples and dicts local to the call
hold them, and the graph returns them: the executor gives them back as Python
numbers of their type (outputs.py), as block attributes too (number state,
capture.py).

Every other use needs the number in Python: a decision (`if`, `while`, `and`),
`range()`, `bool()`, `str()`, formatting, hashing, a call of a function that is not
converted code, keeping it in a list or dict that outlives the call. Each stops
the trace as the read itself did before, a graph break at the user's line, so that
the statement runs as Python with the real value (graph_breaks.py). Guards check in
the graph what Python would raise (an index out of range, an int too large for
float32 to hold exactly, a division by zero): the call then runs as Python and
raises as Python does.

A read of an index an `argmax` or `argmin` computed is known to be an integer in
[0, n) for the n elements it chose from (`bounds`), as are `int()` of it and a
list's element chosen among such numbers: indexing by one needs no guard where
every value it can take is in range (a Viterbi decoder's back-pointers).

Only reads of legacy float32 arrays, which float32 holds exactly, become
HostValues, and only outside the bodies of graph branches and loops, where a
guard cannot reach, and outside export; other reads stay graph breaks.
"""
import builtins
import operator

import mxnet as mx
import numpy as np

from ...origin import user_location
from . import guards, tracing
from .numpy_interface import is_numpy_symbol

# Integers float32 holds exactly: a HostValue standing for an int stays within them.
EXACT_INTEGERS = 2 ** 24
_PYTHON = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
           "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "<": operator.lt,
           "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
           "!=": operator.ne}
# Python's binary operators between graph values, broadcasting as NDArray's do
# (conversion/operators/arithmetic.py uses them too).
BROADCASTING = {"+": mx.sym.broadcast_add, "-": mx.sym.broadcast_sub, "*": mx.sym.broadcast_mul,
                "/": mx.sym.broadcast_div, "%": mx.sym.broadcast_mod, "**": mx.sym.broadcast_power,
                "//": lambda a, b: mx.sym.floor(mx.sym.broadcast_div(a, b)),
                "<": mx.sym.broadcast_lesser, "<=": mx.sym.broadcast_lesser_equal,
                ">": mx.sym.broadcast_greater, ">=": mx.sym.broadcast_greater_equal,
                "==": mx.sym.broadcast_equal, "!=": mx.sym.broadcast_not_equal}
# What NDArray's operators take a number for (NDArray has no `//`).
_WITH_ARRAYS = frozenset(BROADCASTING) - {"//"}
_DIVISIONS = ("/", "//", "%")
_NUMBERS = (bool, int, float, np.number, np.bool_)
_DUNDERS = {"+": "add", "-": "sub", "*": "mul", "/": "truediv", "//": "floordiv", "%": "mod",
            "**": "pow", "<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}
_REFLECTED = ("+", "-", "*", "/", "//", "%", "**")


class HostValue:
    """A number read from a tensor while tracing, kept in the graph: `symbol` (a
    one-element float32 Symbol) and `type` (the Python or numpy type of the number
    the read gives); `where`: the user's line of the read; `bounds`: (low, high)
    where the number is known to be an integer with low <= number <= high, from
    what computed it, else None."""

    __slots__ = ("symbol", "type", "where", "bounds")

    def __init__(self, symbol, value_type, where, bounds=None):
        self.symbol, self.type, self.where, self.bounds = symbol, value_type, where, bounds

    def needed(self, use):
        """The graph break for a use that needs the number in Python."""
        return tracing.FallbackRequired(
            "%s needs the value read into Python at %s (a host read), so the statement runs as "
            "Python" % (use, self.where), user_location(), breakable=True)

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)    # protocol probes: a number has no such method
        raise self.needed("`.%s`" % name)

    def _python_only(use):  # noqa: N805 - builds methods below
        def method(self, *args):
            raise self.needed(use)
        return method

    __bool__ = _python_only("a truth test (`if`, `while`, `and`, `bool()`)")
    __index__ = __int__ = _python_only("an integer conversion outside converted code")
    __float__ = __complex__ = _python_only("a float conversion outside converted code")
    __str__ = __repr__ = __format__ = _python_only("turning it into text")
    __hash__ = _python_only("hashing (a dict key, a set)")
    __iter__ = __len__ = __getitem__ = __contains__ = _python_only("using it as a sequence")
    __call__ = _python_only("calling it")
    __array__ = _python_only("making a NumPy array of it")
    __and__ = __or__ = __xor__ = __lshift__ = __rshift__ = __invert__ = \
        __rand__ = __ror__ = __rxor__ = __rlshift__ = __rrshift__ = _python_only("bitwise arithmetic")
    del _python_only

    def _operator(name, reflected=False):  # noqa: N805 - builds methods below
        def method(self, other):
            return binary_op(other, self, name) if reflected else binary_op(self, other, name)
        return method

    for _name, _dunder in _DUNDERS.items():
        locals()["__%s__" % _dunder] = _operator(_name)
        if _name in _REFLECTED:
            locals()["__r%s__" % _dunder] = _operator(_name, reflected=True)
    del _operator, _name, _dunder

    def __neg__(self):
        return _unary(self, mx.sym.negative, operator.neg)

    def __pos__(self):
        return self

    def __abs__(self):
        return _unary(self, mx.sym.abs, builtins.abs)

    def __round__(self, digits=None):
        if digits is not None or self.type is not float:
            raise self.needed("round() with digits, or of a %s," % self.type.__name__)
        # Python rounds half to even, as rint does.
        return _integer(HostValue(mx.sym.rint(self.symbol), int, self.where))


def is_host_value(value):
    return isinstance(value, HostValue)


def read(symbol):
    """`symbol.asscalar()` while tracing: a HostValue, or None where the read must
    stay a graph break (see the module's docstring)."""
    trace = tracing.current()
    if trace is None or trace.staging or trace.export is not None or \
            is_numpy_symbol(symbol) or len(symbol.list_outputs()) != 1:
        return None
    try:
        shape = trace.static_shape(symbol)
    except AttributeError:
        return None
    if tuple(shape) != (1,) or trace.inferred_dtype(symbol) != np.float32:
        return None   # as written: asscalar's own error, or a value float32 may not hold
    return HostValue(mx.sym.BlockGrad(symbol), np.float32, user_location(),
                     _index_bounds(trace, symbol))


_INDEX_OPS = ("argmax", "argmin")


def _index_bounds(trace, symbol):
    """(0, n - 1) where `symbol` is an index `argmax` or `argmin` chose among n
    elements (its output holds nothing else, NaNs included), else None."""
    if symbol.attr("op_name") not in _INDEX_OPS:
        return None
    try:
        shape = trace.static_shape(symbol.get_children()[0])
    except AttributeError:
        return None
    axis = symbol.attr("axis")
    if axis in (None, "None"):
        count = int(np.prod(shape))
    else:
        count = shape[int(axis)] if -len(shape) <= int(axis) < len(shape) else 0
    return (0, count - 1) if 0 < count <= EXACT_INTEGERS else None


def _usable():
    """Whether HostValues may be used here: not in the body of a graph branch or loop,
    whose values and guards stay inside it."""
    trace = tracing.current()
    return trace is not None and not trace.staging


def _refuse_inside_bodies(value, use):
    if not _usable():
        raise value.needed("%s inside a branch or loop on a tensor" % use)


def _check(holds, failure):
    """A guard: when it fails, the call runs as Python, which raises as Python does."""
    tracing.add_guard(guards.Guard(user_location(), holds, failure, speculative=False))


def _integer(value):
    """`value` (standing for an int): guarded to stay where float32 holds ints exactly,
    unless its bounds say so."""
    if value.bounds is not None and max(map(abs, value.bounds)) <= EXACT_INTEGERS:
        return value
    _check(mx.sym.abs(value.symbol) <= EXACT_INTEGERS,
           "an integer read from a tensor at %s exceeds %d, which float32 cannot hold exactly"
           % (value.where, EXACT_INTEGERS))
    return value


def _is_integer_type(value_type):
    return issubclass(value_type, (int, np.integer)) and not issubclass(value_type, bool)


def _constant(number):
    return mx.sym.full((1,), float(number))


def _unary(value, graph_op, python_op):
    _refuse_inside_bodies(value, "arithmetic")
    return HostValue(graph_op(value.symbol), type(python_op(value.type(1))), value.where)


def involved(*values):
    return any(isinstance(value, HostValue) for value in values)


def binary_op(left, right, name):
    """`left <name> right` where one is a HostValue: a HostValue, or an array where the
    other is an array; a graph break for what only Python can compute."""
    host = left if isinstance(left, HostValue) else right
    _refuse_inside_bodies(host, "arithmetic")
    if name not in _PYTHON:
        raise host.needed("the operator `%s`" % name)
    arrays = [value for value in (left, right) if isinstance(value, mx.sym.Symbol)]
    if arrays:
        if name not in _WITH_ARRAYS or is_numpy_symbol(arrays[0]):
            raise host.needed("`%s` with an array" % name)
        # NDArray's operators take a number as a scalar of the array's dtype: a
        # float32 array here (another dtype fails MXNet's type inference).
        return BROADCASTING[name](*[value.symbol if isinstance(value, HostValue) else value
                              for value in (left, right)])
    samples = []
    for value in (left, right):
        if isinstance(value, HostValue):
            samples.append(value.type(3))
        elif isinstance(value, _NUMBERS) and not (isinstance(value, (int, np.integer)) and
                                                  abs(int(value)) > EXACT_INTEGERS):
            samples.append(value)
        else:
            raise host.needed("`%s` with a %s" % (name, type(value).__name__))
    if name == "**" and isinstance(right, HostValue) and _is_integer_type(right.type):
        raise host.needed("an integer power by a number read from a tensor")
    try:
        result_type = type(_PYTHON[name](*samples))
    except ArithmeticError:   # by a constant zero: Python's error, from Python
        raise host.needed("`%s` by zero" % name) from None
    left_symbol, right_symbol = [value.symbol if isinstance(value, HostValue) else
                                 _constant(value) for value in (left, right)]
    if name in _DIVISIONS and not issubclass(result_type, np.generic):
        # Python raises ZeroDivisionError where numpy and the graph give inf or nan.
        _check(guards.truth(right_symbol),
               "a division by zero of a number read from a tensor at %s" % host.where)
    result = HostValue(BROADCASTING[name](left_symbol, right_symbol), result_type, host.where)
    return _integer(result) if _is_integer_type(result_type) else result


def passed(args, kwargs):
    """Whether converted code's call with `args` and `kwargs` passes HostValues."""
    return any(isinstance(arg, HostValue) for arg in list(args) + list((kwargs or {}).values()))


def call(f, args, kwargs):
    """`f(*args, **kwargs)` in converted code, some arguments HostValues: builtins on
    numbers take them; NotImplemented where the call goes ahead as it is (container
    methods and constructors, converted functions); the number is needed in Python
    for any other function."""
    value = next(arg for arg in list(args) + list((kwargs or {}).values())
                 if isinstance(arg, HostValue))
    _refuse_inside_bodies(value, "passing it to a function")
    if f is int and len(args) == 1 and not kwargs:
        if _is_integer_type(value.type) or value.bounds is not None:
            return HostValue(value.symbol, int, value.where, value.bounds)
        # int() truncates towards zero, as fix does.
        return _integer(HostValue(mx.sym.fix(value.symbol), int, value.where))
    if f is float and len(args) == 1 and not kwargs:
        return HostValue(value.symbol, float, value.where)
    if f is isinstance and len(args) == 2 and args[0] is value:
        return issubclass(value.type, args[1])
    if f in (abs, round) and not kwargs:
        return f(*args)
    owner = getattr(f, "__self__", None)
    if isinstance(owner, (list, dict, set)) and id(owner) in tracing.current().kept_containers:
        raise value.needed("keeping it in a %s that outlives the call" % type(owner).__name__)
    if _takes_any_value(f):
        return NotImplemented
    raise value.needed("a call of %s" % getattr(f, "__qualname__", type(f).__name__))


def _takes_any_value(f):
    """Functions that hold values without reading them: methods of lists, dicts and
    sets, container constructors, and code that is converted in turn (not MXNet's,
    NumPy's or Python's builtins)."""
    owner = getattr(f, "__self__", None)
    if isinstance(owner, (list, dict, set, tuple)) or f in (list, tuple, dict, set, reversed,
                                                            enumerate, zip, len, id, type):
        return True
    module = getattr(f, "__module__", None) or ""
    return not (module.split(".")[0] in ("mxnet", "numpy", "math", "builtins", "gluon_dyn")
                or isinstance(f, (type(len), type)) or isinstance(f, mx.gluon.Block))


def indexes(target, key):
    """Whether `target[key]` involves HostValues."""
    parts = key if isinstance(key, tuple) else (key,)
    return isinstance(target, HostValue) or any(isinstance(part, HostValue) for part in parts)


def get_item(target, key):
    """`target[key]` where the key holds HostValues (the target is an array, or a list
    or tuple of arrays or numbers); a graph break otherwise."""
    parts = key if isinstance(key, tuple) else (key,)
    if isinstance(target, HostValue):
        raise target.needed("indexing it")
    host = next(part for part in parts if isinstance(part, HostValue))
    _refuse_inside_bodies(host, "indexing")
    for part in parts:
        if isinstance(part, HostValue) and not _is_integer_type(part.type):
            raise part.needed("an index of type %s" % part.type.__name__)
    if isinstance(target, mx.sym.Symbol) and not is_numpy_symbol(target) and \
            len(target.list_outputs()) == 1:
        return _array_item(target, parts, host)
    if isinstance(target, (list, tuple)) and len(parts) == 1:
        return _sequence_item(target, host)
    raise host.needed("indexing a %s" % type(target).__name__)


def _position(index, length, what):
    """`index` (a HostValue) as an index `take` reads with mode="wrap" (negative ones
    count from the end); guarded to be in [-length, length) (Python raises
    IndexError otherwise), unless its bounds say it is."""
    low, high = index.bounds if index.bounds is not None else (-EXACT_INTEGERS, EXACT_INTEGERS)
    in_range = [(index.symbol < length) if high >= length else None,
                (index.symbol >= -length) if low < -length else None]
    in_range = [test for test in in_range if test is not None]
    if in_range:
        _check(in_range[0] if len(in_range) == 1 else
               mx.sym.broadcast_logical_and(*in_range),
               "an index read from a tensor at %s is out of range for %s of length %d"
               % (index.where, what, length))
    return index.symbol


def _array_item(target, parts, host):
    """An NDArray indexed by ints, slices and HostValues: the axes of numbers drop (a
    legacy NDArray keeps one axis when all go)."""
    try:
        shape = tracing.static_shape(target)
    except AttributeError:
        raise host.needed("indexing an array whose shape is known only when the graph "
                          "runs") from None
    if len(parts) > len(shape) or not all(isinstance(part, (int, slice, HostValue)) and
                                          not isinstance(part, bool) for part in parts):
        raise host.needed("this index")
    begin, end, step, kept, gathered = [], [], [], [], []
    for axis, dim in enumerate(shape):
        part = parts[axis] if axis < len(parts) else slice(None)
        if isinstance(part, HostValue):
            begin.append(0), end.append(dim), step.append(1)
            gathered.append((axis, _position(part, dim, "axis %d" % axis)))
        elif isinstance(part, slice):
            start, stop, stride = part.indices(dim)
            begin.append(start), end.append(stop if stop >= 0 or stride > 0 else None)
            step.append(stride), kept.append(len(range(start, stop, stride)))
        else:
            position = part + dim if part < 0 else part
            if not 0 <= position < dim:
                raise IndexError("index %d is out of bounds for axis %d with size %d"
                                 % (part, axis, dim))
            begin.append(position), end.append(position + 1), step.append(1)
    whole = all(b == 0 and e == dim and s == 1 for b, e, s, dim in zip(begin, end, step, shape))
    result = target if whole else mx.sym.slice(target, begin=tuple(begin), end=tuple(end),
                                               step=tuple(step))
    for axis, position in gathered:
        result = mx.sym.take(result, position, axis=axis, mode="wrap")
    return mx.sym.reshape(result, shape=tuple(kept) or (1,))


def _sequence_item(target, host):
    """A list or tuple of same-shaped arrays, or of numbers, indexed by a HostValue."""
    if not target:
        raise host.needed("indexing an empty %s" % type(target).__name__)
    if all(isinstance(item, mx.sym.Symbol) and not is_numpy_symbol(item) for item in target):
        try:
            shapes = {tuple(tracing.static_shape(item)) for item in target}
        except AttributeError:
            shapes = None
        if shapes is None or len(shapes) != 1:
            raise host.needed("indexing a list of arrays of different or unknown shapes")
        stacked = mx.sym.stack(*target, axis=0)
        position = _position(host, len(target), "a %s" % type(target).__name__)
        return mx.sym.squeeze(mx.sym.take(stacked, position, axis=0, mode="wrap"), axis=0)
    types = {item.type if isinstance(item, HostValue) else type(item) for item in target}
    if len(types) != 1 or not all(isinstance(item, (HostValue,) + _NUMBERS) for item in target):
        raise host.needed("indexing a list of values other than numbers of one type")
    if any(not isinstance(item, HostValue) and abs(float(item)) > EXACT_INTEGERS
           for item in target):
        raise host.needed("indexing a list of numbers float32 cannot hold exactly")
    values = mx.sym.concat(*[item.symbol if isinstance(item, HostValue) else _constant(item)
                             for item in target], dim=0)
    position = _position(host, len(target), "a %s" % type(target).__name__)
    return HostValue(mx.sym.take(values, position, axis=0, mode="wrap"), types.pop(), host.where,
                     _bounds_of_any(target))


def _bounds_of_any(values):
    """The bounds of a number that is one of `values` (HostValues and numbers), or None
    where one of them has none."""
    bounds = [value.bounds if isinstance(value, HostValue) else
              (int(value),) * 2 if _is_integer_type(type(value)) else None for value in values]
    if any(bound is None for bound in bounds):
        return None
    return min(low for low, _ in bounds), max(high for _, high in bounds)


def asserted(test):
    """The test of an `assert` in converted code (converters/asserts.py): a HostValue
    becomes a guard, and the assertion holds in the trace; any other test is itself."""
    if not isinstance(test, HostValue):
        return test
    _refuse_inside_bodies(test, "an assertion")
    _check(guards.truth(test.symbol),
           "an assertion on a number read from a tensor at %s failed" % test.where)
    return True


def python_value(array, value_type):
    """The number a HostValue stands for, from its graph output (`array`), as its type."""
    value = float(array.asnumpy().reshape(-1)[0])
    if value_type is bool or issubclass(value_type, np.bool_):
        return value_type(value != 0)
    if _is_integer_type(value_type):
        return value_type(round(value))
    return value_type(value)
