"""Stage 1 of a call: what the call is keyed on, and the cache of graphs by key.

A graph serves a call whose key equals the key it was traced under: the training
mode, the Python values the forward may branch on (python_state.py), and the
arguments' structure (arguments.py) with array shapes and dtypes. Shapes follow
a ladder (as JANUS): a graph is first traced for exact shapes; once a dimension's
size has varied between calls and no trace read it (`x.shape[0]`), keys leave it
open (None) and one graph serves every size of it.
"""
import collections
import dataclasses

from mxnet import autograd

from ..capturing import arguments, numpy_interface
from ..capturing.python_state import python_state
from .call_description import CallMatch

MAX_GRAPHS = 16
RECENT_MISSES = 10   # miss reasons kept for the report


@dataclasses.dataclass(frozen=True)
class CacheKey:
    training: bool
    python_values: tuple    # ((name, value), ...); child blocks as ("block", id)
    arguments: tuple        # arguments.ArgumentLayout.structure, open dims as None
    # numpy_interface.mode(): np shape semantics change what operators give.
    interface: tuple = (False, False)

    def miss_reason(self, cached):
        """Why this key does not match `cached`, readably: "argument array 0 dim 0:
        expected 4, got 3", "Python value use_gate: expected True, got False"."""
        if cached.training != self.training:
            return "training mode: expected %s, got %s" % (cached.training, self.training)
        if cached.interface != self.interface:
            return "MXNet's numpy interface (np shape, np array): expected %s, got %s" % (
                cached.interface, self.interface)
        then = dict(cached.python_values)
        for name, value in self.python_values:
            if name in then and then[name] != value:
                if isinstance(value, tuple) and value[0] == "block":
                    return "child block %s was replaced" % name
                return "Python value %s: expected %r, got %r" % (name, then[name], value)
        arrays_then = [part for part in cached.arguments if part[0] == "array"]
        arrays = [part for part in self.arguments if part[0] == "array"]
        if len(arrays_then) == len(arrays) and len(cached.arguments) == len(self.arguments):
            for index, ((_, shape_then, dtype_then), (_, shape, dtype)) in enumerate(
                    zip(arrays_then, arrays)):
                if len(shape_then) != len(shape):
                    return "argument array %d: expected %d dimensions, got %d" % (
                        index, len(shape_then), len(shape))
                for dim, (size_then, size) in enumerate(zip(shape_then, shape)):
                    if size_then is not None and size_then != size:
                        return "argument array %d dim %d: expected %s, got %s" % (
                            index, dim, size_then, "any size (it varied, no trace read it)"
                            if size is None else size)
                if dtype_then != dtype:
                    return "argument array %d dtype: expected %s, got %s" % (index, dtype_then,
                                                                            dtype)
        return "the arguments' structure differs (%d parts, was %d)" % (
            len(self.arguments), len(cached.arguments))


class ShapeLadder:
    """Which argument dimensions a key leaves open: those whose size varied between
    calls and that no trace read."""

    def __init__(self):
        self.read_dims = {}     # argument array index -> dimensions traced code read
        self.sizes = {}         # (argument array index, dimension) -> sizes seen

    def note_call(self, layout):
        for leaf, shape in enumerate(arguments.array_shapes(layout)):
            for dim, size in enumerate(shape):
                self.sizes.setdefault((leaf, dim), set()).add(size)

    def note_reads(self, shape_reads):
        """A trace read these dimensions ({argument array index: dims}); every trace
        reports each argument, so an argument it did not read stays a candidate."""
        for leaf, dims in shape_reads.items():
            self.read_dims.setdefault(leaf, set()).update(dims)

    def open_dims(self):
        """{argument array index: dims} left open by keys from now on."""
        relaxed = {}
        for (leaf, dim), sizes in self.sizes.items():
            if len(sizes) > 1 and leaf in self.read_dims and dim not in self.read_dims[leaf]:
                relaxed.setdefault(leaf, set()).add(dim)
        return relaxed


def key_for(block, training, layout, ladder, tracer):
    """The key of a call; the block attributes in `tracer.unkeyed_paths` (graph
    inputs, or containers graphs only write to) are not part of it, nor module
    values outside `tracer.modules_read` (no converted code of the block reads them)."""
    return CacheKey(training, python_state(block, tracer.unkeyed_paths, tracer.modules_read),
                    arguments.relaxed_structure(layout, ladder.open_dims()),
                    numpy_interface.mode())


class RepeatedCall:
    """The latest call a cached graph served, as what its key was made from: a next
    call of arrays of the same shapes, dtypes and contexts, in the same modes, with
    the same Python values, has the same key and is served by the same graph,
    without the key made and looked up again (a third of a small policy network's
    call: REINFORCE decides 86 times a training step). The arrays and modes of a
    call of MXNet arrays are compared in one C call (call_description.py). Kept from
    one call through key_for to the next such call; the cache changing drops it (a
    failed guard clears it).

    `form(args)`, for a block called on more than arrays (a CallBatch:
    call_batch.repeat_form), gives (what of the call is not its arrays, hashable;
    the arrays as a tuple), or None where the call cannot be told that way: a next
    call of the same form whose arrays match is served alike."""

    def __init__(self, form=None):
        self._form = form
        self._latest = None     # (skeleton or form, key, layout, executor, cache version)
        self._match = None      # the CallMatch of the latest call, or None
        # (The executor's ExecutorLane for the remembered call, or None; how many
        # plans the executor had when it was looked for: a plan built since may have one.)
        self._lane = None

    def remember(self, skeleton, key, layout, executor, cache, args):
        """A call on `args`, arrays alone (`skeleton`: ArgumentSkeleton.of_arrays_alone),
        was keyed `key` and served by `executor`, the graph `cache` holds for it."""
        if self._form is not None:
            skeleton, args = self._form(args) or (None, None)
        self._latest = None if skeleton is None else \
            (skeleton, key, layout, executor, cache.version)
        match = None if skeleton is None else CallMatch.of(args)
        # Described after the call: used only where the modes are still the key's.
        self._match = match if match is not None and (match.training, match.np_shape) == \
            (key.training, key.interface[0]) else None
        self._lane = None

    def forget(self):
        self._latest = self._match = self._lane = None

    def lane(self, args):
        """The remembered graph's ExecutorLane for an inference call repeating the
        remembered one (on `args`), or None."""
        executor = self._latest[3]
        if self._lane is None or self._lane[1] != len(executor.tvm_plans):
            self._lane = (executor.lane(args), len(executor.tvm_plans))
        return self._lane[0]

    def served_by(self, args, block, tracer, cache):
        """(layout, executor, whether autograd records) of the remembered call if the
        call on `args` repeats it; else None."""
        latest = self._latest
        if latest is None:
            return None
        if cache.version != latest[4]:
            self.forget()           # its graph may be dropped: not kept alive here
            return None
        key = latest[1]
        if self._form is not None:
            form = self._form(args)
            if form is None or self._match is None or form[0] != latest[0]:
                return None
            args = form[1]
        if self._match is not None:
            fits, recording = self._match.matches(args)
            if not fits or numpy_interface.np_arrays() != key.interface[1]:
                return None
        elif arguments.arrays_fit(latest[0], args) and \
                autograd.is_training() == key.training and numpy_interface.mode() == key.interface:
            recording = autograd.is_recording()
        else:
            return None
        state = python_state(block, tracer.unkeyed_paths, tracer.modules_read)
        if state is not key.python_values and state != key.python_values:
            return None
        return latest[2], latest[3], recording


class GraphCache:
    """The graphs of a block by key, the most recent MAX_GRAPHS, and why recent
    calls missed."""

    def __init__(self):
        self._entries = collections.OrderedDict()
        self.misses = 0
        self.miss_reasons = []
        self.version = 0        # counts changes of the entries (RepeatedCall)

    def get(self, key):
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
            if self._entries:
                latest = next(reversed(self._entries))
                self.miss_reasons = (self.miss_reasons + [key.miss_reason(latest)])[-RECENT_MISSES:]
        return entry

    def peek(self, key):
        """The graph for `key`, or None, as a look that is not a call (no miss counted)."""
        return self._entries.get(key)

    def put(self, key, entry):
        self.version += 1
        self._entries[key] = entry
        while len(self._entries) > MAX_GRAPHS:
            self._entries.popitem(last=False)

    def clear(self):
        self.version += 1
        self._entries.clear()

    def __len__(self):
        return len(self._entries)

    def values(self):
        return list(self._entries.values())
