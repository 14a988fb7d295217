"""Reading the Python data a recursive function recurses over (a tree's nodes).

A body is traced with its Python arguments behind proxies that note every read
as a path from the arguments ("tree.children[0]") and what it found: an array's
shape and dtype, a Python value, a sequence's length, an object's type. Those
findings, in order, are the body's signature (signatures.py); a new node is
matched against them by reading the same paths on it, without running any of
the user's code (JANUS reads Python objects in its graphs the same way, by
attribute: PyGetAttrOp). Arrays read become the body's inputs.

A number (int or float) enters the signature only when the body uses its value
(branches on it, builds a shape or a constant from it); a number that only
becomes array data (`mx.nd.array([tree.label])`) or indexes arrays
(`x[tree.idx]`, JANUS makes such values tensors too) is an input like an array,
so labels, per-node ids and positions in the sentence do not multiply the bodies.
Arrays a caller computed and passed down (passes.py) are read as inputs too.
"""
import inspect
import operator
import types

import mxnet as mx
import numpy as np
from mxnet import gluon

from ..conversion.operators.subscripts import get_item
from .passes import Passed
from .unsupported import Unsupported

# Keyed by value when read; modules and functions (`F` passed as `mx.nd`) by identity.
OBSERVED_TYPES = (bool, str, bytes, type(None), np.generic, types.ModuleType,
                  types.FunctionType)
NUMBER_TYPES = (int, float)                                   # keyed by value when used


class Raised:
    """A read that raised: what the body saw instead of a value."""
    __slots__ = ("error",)

    def __init__(self, error):
        self.error = error


def observe(value):
    """What a body may depend on in `value` (hashable): for arrays shape and dtype,
    for Python values the value, for sequences and dicts their length and keys,
    for objects their type."""
    finder = FINDERS.get(type(value))
    if finder is None:
        finder = FINDERS[type(value)] = _finder(value)
    return finder(value)


def _finder(value):
    """How values of `value`'s type are observed: every check below depends on
    the type alone (matching a node runs this per value read, so it is looked
    up by type once)."""
    kind = type(value)
    if isinstance(value, mx.nd.NDArray):
        # An array with a leading axis of 1 is a row (stacked over a group of nodes:
        # its shape fixed); any other is read whole, its sizes noted only where the
        # body reads them (Recorder.note_shape_read).
        return lambda array: ("array", array.shape, array.dtype) if array.shape[:1] == (1,) \
            else ("whole", len(array.shape), array.dtype)
    if isinstance(value, Passed):
        return Passed.finding
    if isinstance(value, OBSERVED_TYPES + NUMBER_TYPES):
        return lambda python_value: ("value", kind, python_value)
    if isinstance(value, (list, tuple)):
        return lambda sequence: ("sequence", kind, len(sequence))
    if isinstance(value, dict):
        return lambda mapping: ("dict", kind, tuple(mapping))
    if isinstance(value, Raised):
        return lambda raised: ("raises", type(raised.error))
    if inspect.ismethod(value):
        return lambda method: ("method", method.__func__)
    if not isinstance(value, (gluon.Block, type)) and not callable(value):
        # Whether an object has a __dict__ can differ between objects of a type.
        return lambda thing: ("object", kind) if hasattr(thing, "__dict__") else (
            "unsupported", kind)
    return lambda thing: ("unsupported", kind)


FINDERS = {}   # type -> its values' findings (observe)


def apply(value, step):
    """The value one step along a path from `value`; a Raised if reading raises."""
    try:
        return reader(step)(value)
    except Exception as error:  # noqa: BLE001 - the body sees the same error
        return Raised(error)


def reader(step):
    """The function taking one step along a path (it raises what reading raises)."""
    kind = step[0]
    if kind == "attr":
        return operator.attrgetter(step[1])
    if kind in ("item", "key"):
        return operator.itemgetter(step[1])
    if kind == "call":
        return lambda method: method(*step[1], **dict(step[2]))
    return {"len": len, "bool": bool, "iter": list, "repr": repr}[kind]


def data_finding(values):
    """What a data step found: the type of each number (its values are inputs)."""
    if isinstance(values, (list, tuple)):
        return (type(values),) + tuple(data_finding(v) for v in values)
    return type(values)


def describe(path, names):
    """`path` as the user wrote it: "tree.children[0]", "len(tree)"."""
    text = names[path[0][1]] if path[0][1] < len(names) else "argument %d" % path[0][1]
    for step in path[1:]:
        kind = step[0]
        if kind == "attr":
            text += "." + step[1]
        elif kind in ("item", "key"):
            text += "[%r]" % (step[1],)
        elif kind == "call":
            text += "(%s)" % ", ".join([repr(a) for a in step[1]] +
                                       ["%s=%r" % item for item in step[2]])
        else:
            text = "%s(%s)" % ({"iter": "list"}.get(kind, kind), text)
    return text


def step_text(function, step):
    """A signature step of `function` as the user would read it."""
    if step[0] == "call":
        return "the call of %s" % step[1]
    return describe(step[1], function.parameters) if step[0] == "read" else "array data"


class Recorder:
    """The reads of one traced body, in order, and the proxies it hands out.

    `steps` holds (step, finding): ("read", path) steps, ("data", template) steps
    (numbers made into an array) and, added by body.py, ("call", ...) steps.
    `arrays` holds (graph variable, real value) per input the body read (an array,
    or the numpy data of a data step), in order. `names` are the function's
    parameter names, for messages."""

    def __init__(self, prefix, trace, where, names):
        self.prefix, self.trace, self.where, self.names = prefix, trace, where, names
        self.steps = []
        self.arrays = []
        self.data_inputs = set()   # names of the inputs made from numbers
        self._memo = {}     # path -> what the body got (a proxy, a value, a variable)
        self._real = {}     # path -> the real value
        # (path, own input index) -> the input of an int of the structure indexing
        # that input, an array read whole
        self._indices = {}
        # Input name -> (path, dimensions noted) of the arrays read whole, whose
        # sizes the signature holds only where the body reads them.
        self.whole = {}
        self.index_inputs = {}   # own input index -> the own input it indexes

    def read(self, path, produce):
        if path not in self._memo:
            value = produce()
            self._real[path] = value
            if type(value) in NUMBER_TYPES:
                self._memo[path] = NumberProxy(self, path, value)   # noted when used
            else:
                finding = observe(value)
                self.steps.append((("read", path), finding))
                self._memo[path] = self._wrap(path, value, finding)
        got = self._memo[path]
        if isinstance(got, Raised):
            raise got.error
        return got

    def note_use(self, path, value):
        """A number read at `path` is used as a value: its value joins the signature."""
        self.steps.append((("read", path), observe(value)))

    def note_shape_read(self, name, dims):
        """The body read dimensions `dims` of input `name`'s shape: for an array
        read whole, each joins the signature (its size, as a "shape" step)."""
        if name not in self.whole:
            return
        path, noted = self.whole[name]
        for dim in sorted(set(dims) - noted):
            noted.add(dim)
            self.steps.append((("shape", path, dim), self._real[path].shape[dim]))

    def open_dims(self):
        """(input name, dimension) of the sizes of arrays read whole that the
        signature does not hold."""
        return [(name, dim) for name, (path, noted) in self.whole.items()
                for dim in range(len(self._real[path].shape)) if dim not in noted]

    def data(self, template, real, dtype):
        """An input holding numbers of the structure (`mx.nd.array([tree.label])`)."""
        values = np.array(real, dtype=dtype)
        variable = self._input(values.shape)
        self.data_inputs.add(variable.name)
        self.steps.append((("data", template, np.dtype(dtype).name), data_finding(real)))
        self.arrays.append((variable, values))
        return variable

    def indexed(self, target, key):
        """`target[key]` for `target` an array read whole (the sentence) and a key
        whose first part is a number of the structure used for nothing else so far
        (`x[tree.idx]`): the row an int picks, by an int64 input per node holding
        its position (checked and made non-negative as the nodes are matched:
        index_position), so that nodes differing in it share a body. None for
        other keys (and, after the "index" step, for numbers that are not ints)."""
        parts = key if isinstance(key, tuple) else (key,)
        first = parts[0]
        if type(first) is not NumberProxy or _part(first, "_used"):
            return None
        target_index = next((index for index, (variable, _) in enumerate(self.arrays)
                             if variable is target and variable.name in self.whole), None)
        if target_index is None:
            return None
        path, value = _part(first, "_path"), _part(first, "_value")
        if (path, target_index) not in self._indices:
            self.steps.append((("index", path, target_index), type(value)))
            if type(value) is not int:
                return None
            variable = self._input((1,))
            self.data_inputs.add(variable.name)
            self.index_inputs[len(self.arrays)] = target_index
            self.arrays.append((variable, index_position(value, self.arrays[target_index][1])))
            self._indices[(path, target_index)] = variable
        if type(value) is not int:
            return None
        row = mx.sym.squeeze(mx.sym.take(target, self._indices[(path, target_index)], axis=0),
                             axis=0)
        return get_item(row, parts[1:]) if len(parts) > 1 else row

    def _input(self, shape):
        name = "%s_in%d" % (self.prefix, len(self.arrays))
        self.trace.shapes[name] = shape
        return mx.sym.var(name)

    def _wrap(self, path, value, finding):
        kind = finding[0]
        if kind in ("array", "whole", "passed"):
            variable = self._input(value.shape)
            self.arrays.append((variable, value))
            if kind == "whole" or kind == "passed" and value.shared:
                self.whole[variable.name] = (path, set())
            return variable
        if kind in ("value", "raises"):
            return value
        if kind == "sequence":
            return SequenceProxy(self, path, value)
        if kind == "dict":
            return DictProxy(self, path, value)
        if kind == "object":
            return ObjectProxy(self, path, value)
        if kind == "method":
            return MethodProxy(self, path, value)
        raise Unsupported(
            "the recursion reads a %s (%s): the recursion engine reads arrays, Python values, "
            "lists, tuples, dicts and plain objects" % (finding[1].__name__,
                                                       describe(path, self.names)), self.where)

    def real(self, path):
        return self._real[path]


def index_position(value, target):
    """The (1,) int64 position of row `value` of `target` (an array, or a Passed),
    counted from the end if negative; IndexError as NDArray raises, out of range."""
    length = target.shape[0]
    if not -length <= value < length:
        raise IndexError("index %d is out of bounds for axis 0 with size %d" % (value, length))
    return np.array([value + length if value < 0 else value], dtype=np.int64)


def _part(value, name):
    return object.__getattribute__(value, name)


def _refuse(what):
    def refuse(self, *args, **kwargs):
        recorder = _part(self, "_recorder")
        raise Unsupported(
            "the recursion %s %s, which the recursion engine cannot replay from reads"
            % (what, describe(_part(self, "_path"), recorder.names)), recorder.where)
    return refuse


class Proxy:
    """Stands for a Python value of the structure while a body is traced."""
    __slots__ = ("_recorder", "_path", "_value")

    def __init__(self, recorder, path, value):
        object.__setattr__(self, "_recorder", recorder)
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_value", value)

    @property
    def __class__(self):
        return type(_part(self, "_value"))

    def _read(self, step):
        value = _part(self, "_value")
        return _part(self, "_recorder").read(_part(self, "_path") + (step,),
                                             lambda: apply(value, step))

    def __bool__(self):
        return self._read(("bool",))

    def __len__(self):
        return self._read(("len",))

    def __iter__(self):
        return iter(self._read(("iter",)))

    def __getitem__(self, key):
        return self._read(("item", key))

    def __repr__(self):
        return self._read(("repr",))

    __setattr__ = _refuse("assigns an attribute of")
    __delattr__ = _refuse("deletes an attribute of")
    __setitem__ = _refuse("assigns an item of")
    __delitem__ = _refuse("deletes an item of")
    __eq__ = _refuse("compares")
    __ne__ = _refuse("compares")
    __hash__ = _refuse("hashes")
    __contains__ = _refuse("searches")
    __call__ = _refuse("calls")


class ObjectProxy(Proxy):
    __slots__ = ()

    def __getattr__(self, name):
        return self._read(("attr", name))


class MethodProxy(Proxy):
    """A method of an object of the structure: calling it with Python values reads
    its result (running the method on the real object). Not disguised as a method:
    the call is the proxy's own."""
    __slots__ = ()
    __class__ = property(lambda self: MethodProxy)

    def __call__(self, *args, **kwargs):
        if not all(isinstance(a, OBSERVED_TYPES + NUMBER_TYPES)
                   for a in list(args) + list(kwargs.values())):
            _refuse("passes arrays or objects to the method")(self)
        return self._read(("call", args, tuple(sorted(kwargs.items()))))


class SequenceProxy(Proxy):
    """A list or tuple of the structure: its length is part of the signature."""
    __slots__ = ()

    def __new__(cls, *args):
        # Code that rebuilds sequences as `type(value)(items)` gets a plain one.
        if len(args) == 1:
            return list(args[0])
        return super().__new__(cls)

    def _length(self):
        return len(_part(self, "_value"))

    def __len__(self):
        return self._length()

    def __bool__(self):
        return self._length() > 0

    def __iter__(self):
        return (self._read(("item", index)) for index in range(self._length()))

    def __reversed__(self):
        return (self._read(("item", index)) for index in reversed(range(self._length())))

    def __getitem__(self, index):
        length = self._length()
        if isinstance(index, slice):
            return type(_part(self, "_value"))(self._read(("item", i))
                                               for i in range(*index.indices(length)))
        index = operator.index(index)
        if not -length <= index < length:
            raise IndexError("%s index out of range" % type(_part(self, "_value")).__name__)
        return self._read(("item", index % length))

    def __add__(self, other):
        return type(_part(self, "_value"))(self) + other

    def __radd__(self, other):
        return other + type(_part(self, "_value"))(self)

    def __getattr__(self, name):
        value = _part(self, "_value")
        # An attribute a value without instance attributes (a tuple, a list) lacks
        # (`hasattr(node, "_fields")`, a named-tuple check) is missing for every value
        # of the signature, which holds the type.
        if not hasattr(value, "__dict__") and not hasattr(value, name):
            raise AttributeError("%r object has no attribute %r" % (type(value).__name__, name))
        _refuse("calls %s.%s on" % (type(value).__name__, name))(self)


class DictProxy(Proxy):
    """A dict of the structure: its keys are part of the signature."""
    __slots__ = ()

    def _keys(self):
        return list(_part(self, "_value"))

    def __len__(self):
        return len(self._keys())

    def __bool__(self):
        return bool(self._keys())

    def __iter__(self):
        return iter(self._keys())

    def __contains__(self, key):
        return key in self._keys()

    def __getitem__(self, key):
        if key not in self._keys():
            raise KeyError(key)
        return self._read(("key", key))

    def get(self, key, default=None):
        return self[key] if key in self._keys() else default

    def keys(self):
        return self._keys()

    def values(self):
        return [self[key] for key in self._keys()]

    def items(self):
        return [(key, self[key]) for key in self._keys()]

    def __getattr__(self, name):
        _refuse("calls dict.%s on" % name)(self)


class NumberProxy(Proxy):
    """A number of the structure. Any use of its value (a branch, arithmetic, a
    shape, a constant) notes the value in the signature first; made into array
    data it is an input instead (Recorder.data)."""
    __slots__ = ("_used",)

    def __init__(self, recorder, path, value):
        super().__init__(recorder, path, value)
        object.__setattr__(self, "_used", False)

    def value(self):
        if not _part(self, "_used"):
            object.__setattr__(self, "_used", True)
            _part(self, "_recorder").note_use(_part(self, "_path"), _part(self, "_value"))
        return _part(self, "_value")


def _used(name):
    def method(self, *args):
        return getattr(self.value(), name)(*[a.value() if isinstance(a, NumberProxy) else a
                                             for a in args])
    return method


for _name in ("__bool__ __int__ __float__ __index__ __complex__ __round__ __trunc__ __floor__ "
              "__ceil__ __abs__ __neg__ __pos__ __invert__ __hash__ __repr__ __str__ __format__ "
              "__eq__ __ne__ __lt__ __le__ __gt__ __ge__ __add__ __radd__ __sub__ __rsub__ "
              "__mul__ __rmul__ __truediv__ __rtruediv__ __floordiv__ __rfloordiv__ __mod__ "
              "__rmod__ __pow__ __rpow__ __divmod__ __rdivmod__ __and__ __rand__ __or__ __ror__ "
              "__xor__ __rxor__ __lshift__ __rlshift__ __rshift__ __rrshift__").split():
    setattr(NumberProxy, _name, _used(_name))
NumberProxy.__getattr__ = lambda self, name: getattr(self.value(), name)
del _name


def proxy_path(value):
    """The path of a proxy standing for a value read from the arguments, else None."""
    if isinstance(value, Proxy) and not isinstance(value, MethodProxy):
        return _part(value, "_path")
    return None


def data_template(value):
    """How array data mixing numbers of the structure with constants is rebuilt
    for another node: ("path", path) per number read, ("value", v) per constant;
    None when `value` holds no number of the structure."""
    if isinstance(value, NumberProxy):
        return ("path", _part(value, "_path"))
    if isinstance(value, (list, tuple)):
        items = [data_template(item) for item in value]
        if all(item is None for item in items):
            return None
        return ("sequence", type(value), tuple(item or ("value", v)
                                               for item, v in zip(items, value)))
    return None
