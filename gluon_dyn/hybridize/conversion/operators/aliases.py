"""Arrays that share memory, in a trace: a value assigned into changes for every holder.

An NDArray assigned into in place (`x[i, j] = v`) changes for everyone holding it
(other names, lists, attributes, the caller) and for the arrays viewing its memory
(`row = x[0]`, `y = x.reshape(...)`). A traced Symbol is immutable: the assignment
builds a new Symbol (item_assignment.py), and `assign` gives its value to the
Symbol object that stood for the array, in place: the Python object takes the new
node's handle, so every holder of the object reads the new value, as every holder
of the NDArray does. The views an array gave (`note_view`) are read again from the
new value; a view assigned into writes through to the array it views.

An object can take a new value only where the Symbol it stands for may change:
not a graph input (the caller's or the block's array, which a graph cannot change
in place), and, inside the body of a graph branch or loop being traced, only a
value made in that body. Elsewhere the assigned name alone is rebound to the new
value (item_assignment.py says when that is all imperative code would see).
"""
import sys
import weakref

import mxnet as mx
from ....ops import subgraph
from ....origin import user_location
from ...capturing import tracing

# trace -> _Aliases: what one trace knows about the Symbols it assigned into.
_by_trace = weakref.WeakKeyDictionary()


class View:
    """How a Symbol was read from the array it views: `read(base)` reads it again,
    `write(base, value)` is the base with the view's memory holding `value`.
    `shares` is whether NDArray gives a view there, or a function saying so when first
    asked: where that depends on sizes the trace has not read (`x[:, 0]` views x's
    memory only when x has one row), they are read only if an assignment needs it."""
    __slots__ = ("base", "read", "write", "_shares")

    def __init__(self, base, read, write, shares=True):
        self.base, self.read, self.write, self._shares = base, read, write, shares

    def shares_memory(self):
        if callable(self._shares):
            self._shares = self._shares()
        return self._shares


class _Aliases:
    def __init__(self):
        self.views = {}     # id(view) -> (view, View)
        self.viewed = {}    # id(base) -> ids of its views
        # id(Symbol) -> (the Symbol, a weak reference to the effects.EffectFrame of
        # the graph branch or loop body its operator was made in), for those made
        # inside one. Weak: a frame holds its trace, and a value of _by_trace holding
        # its key would keep every trace, and all its Symbols, alive for good.
        self.made = {}
        # Symbols holding the handles their objects gave up: kept for the trace, so
        # that no new Symbol reuses a handle the trace's caches know (tracing.py).
        self.retired = []


def _aliases():
    trace = tracing.current()
    if trace not in _by_trace:
        _by_trace[trace] = _Aliases()
    return _by_trace[trace]


def note_view(view, base, read, write, shares=True):
    """`view` (a Symbol) was read from `base` sharing its memory, as NDArray's basic
    indexing and `reshape` give views (`read`, `write`, `shares`: see View)."""
    if view is base or tracing.current() is None:
        return
    aliases = _aliases()
    aliases.views[id(view)] = (view, View(base, read, write, shares))
    aliases.viewed.setdefault(id(base), []).append(id(view))


def note_made(symbol):
    """`symbol` was just made by an operator (context_managers.creating_symbols): inside
    a graph branch or loop body, note which."""
    trace = tracing.current()
    if trace is not None and trace.effect_frames:
        _aliases().made[id(symbol)] = (symbol, weakref.ref(trace.effect_frames[-1]))


def _made_here(symbol):
    """Whether `symbol` was made in the graph branch or loop body being traced (at the
    top level: always)."""
    frames = tracing.current().effect_frames
    if not frames:
        return True
    entry = _aliases().made.get(id(symbol))
    return entry is not None and entry[0] is symbol and entry[1]() is frames[-1]


def view_of(symbol):
    """The View `symbol` was read as, or None."""
    entry = _by_trace.get(tracing.current(), _Aliases()).views.get(id(symbol))
    return entry[1] if entry and entry[1].shares_memory() else None


def is_graph_input(symbol):
    """Whether `symbol` is an input of the graph being traced (a variable made outside
    every graph branch and loop body, which would make it a placeholder)."""
    return tracing.is_input(symbol) and symbol.attr(subgraph._SCOPE_ATTR) is None


def refusal(symbol):
    """Why `symbol` cannot take a new value in place (None where it can): a graph
    input, or, inside a graph branch or loop body, a value from outside it."""
    if tracing.is_input(symbol):
        if is_graph_input(symbol):
            return ("it is an array the graph takes as an input (an argument, an array kept "
                    "on the block, a parameter or an array made outside converted code), "
                    "which a graph cannot change in place")
        return "it is a value a graph branch or loop carries"
    if not _made_here(symbol):
        return "it was made outside the graph branch or loop body assigning into it"
    return None


def assign(target, value):
    """`target` (a Symbol) holds `value` from now on, as an NDArray assigned into in
    place; its views and, for a view, the array it views follow. Returns the object
    the assigned name holds: `target` itself, or `value` where `target` cannot
    change (refusal), which then only the name rebound to it sees."""
    view = view_of(target)
    if view is not None:
        why = refusal(view.base)
        if why is not None:
            raise tracing.FallbackRequired(
                "assigning into a view of an array (`row = x[i]` or `x.reshape(...)`, then "
                "`row[...] = ...`) changes that array, but %s" % why, user_location(),
                breakable=True)
        # Cut from the gradient as item_assignment.py cuts a direct assignment:
        # MXNet builds a graph's backward when it first runs it, and `_slice_assign`
        # has none (autograd records no such write: item_assignment.py).
        assign(view.base, mx.sym.BlockGrad(view.write(view.base, value)))
        return target       # read again from its base above
    if refusal(target) is not None:
        _read_views_again(target, value)
        return value
    take_value(target, value)
    _read_views_again(target, target)
    return target


def take_value(symbol, value):
    """Make the object `symbol` stand for `value`'s node (a new Symbol object, made for
    this: it gets `symbol`'s old node, kept for the rest of the trace)."""
    symbol.handle, value.handle = value.handle, symbol.handle
    _aliases().retired.append(value)


def _read_views_again(base, new_base):
    """The views `base` gave that are still held take their values from `new_base`,
    and become its views."""
    aliases = _aliases()
    for view_id in aliases.viewed.pop(id(base), []):
        view, relation = aliases.views.pop(view_id)
        if not held_outside(view) or not relation.shares_memory():
            continue
        if refusal(view) is not None:
            raise tracing.FallbackRequired(
                "an array is assigned into while a view of it (`row = x[i]`) made outside "
                "the graph branch or loop body doing so is held, which would change too",
                user_location(), breakable=True)
        take_value(view, relation.read(new_base))
        note_view(view, new_base, relation.read, relation.write)
        _read_views_again(view, view)


# The references to a Symbol a caller of held_outside has while it asks: its own local
# variable, held_outside's parameter and getrefcount's argument.
_ASKING = 3


def held_outside(symbol):
    """Whether anything holds `symbol` besides the one local variable of the caller
    asking (which has taken it out of its own records) and the trace's records (its
    shape cache, and `made` here): the code may read it later."""
    own = _ASKING
    cached = tracing.current().inferred_shapes.get(symbol.handle.value)
    own += cached is not None and cached[0] is symbol
    entry = _aliases().made.get(id(symbol))
    own += entry is not None and entry[0] is symbol
    return sys.getrefcount(symbol) > own


def fresh(value):
    """`value` as a Symbol object of its own (a new node where it is an existing
    object), which may take over another object's handle."""
    return mx.sym.identity(value)
