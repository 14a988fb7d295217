"""What a traced forward returns, as graph outputs and back.

The return value may nest lists, tuples (named ones too) and dicts of arrays and
Python values. Its Symbols become the graph's outputs and a template keeps the rest:
Python values, and arrays made outside the graph (constants it captured), as they
are; a list, dict or object the call was given is returned as the caller's own.
Elements appended to a list under a branch or loop on a tensor (effects.py) come
out with their presence flags, and the list is rebuilt with the elements the run
produced: how many there are is read from the graph's outputs. Numbers read from
tensors and kept in the graph (host_values.py) come out as Python numbers again.
"""
import mxnet as mx

from . import effects, tracing
from .host_values import HostValue, python_value
from .python_state import NUMBER_TYPES

_PYTHON_VALUES = NUMBER_TYPES + (str, type(None), mx.nd.NDArray)


class _Output(int):
    """In a template: the position of a graph output."""


class _Number:
    """In a template: a number read from a tensor and kept in the graph (host_values.py):
    the position of its graph output, and its Python type."""

    def __init__(self, position, value_type):
        self.position, self.value_type = position, value_type


class _Present:
    """In a template's list: an element appended under a branch on a tensor (its
    value's and flag's output positions), or the rows a graph loop appended (its
    stacked values' and validity flags' positions)."""

    def __init__(self, rows, value, flags):
        self.rows, self.value, self.flags = rows, value, flags

    def elements(self, results):
        flags = results[self.flags].asnumpy().reshape(-1)
        value = results[self.value]
        if not self.rows:
            return [value] if flags[0] else []
        return [value[int(row)] for row in flags.nonzero()[0]]


class _Alias(int):
    """In a template: a list, dict or object among the call's arguments (its index in
    the call's mutable arguments), returned as the caller's own object, as the
    forward as written returns it."""


class OutputTemplates:
    """Templates of values a trace produced (the return value, the new contents of
    the arguments it changed): their Symbols, collected in `symbols`, become graph
    outputs; `aliases` maps id() of the call's mutable arguments to their index."""

    def __init__(self, where, aliases=None):
        self.where, self.aliases = where, aliases or {}
        self.symbols = []
        self._positions = {}    # id(Symbol) -> its position among `symbols`

    def template(self, value):
        if isinstance(value, mx.sym.Symbol):
            return self._output(value)
        if isinstance(value, HostValue):
            return _Number(self._output(value.symbol), value.type)
        if id(value) in self.aliases:
            return _Alias(self.aliases[id(value)])
        if isinstance(value, effects.Conditional) and isinstance(value.value, mx.sym.Symbol):
            return _Present(False, self._output(value.value), self._output(value.present))
        if isinstance(value, effects.Rows):
            return _Present(True, self._output(value.stacked), self._output(value.valid))
        if isinstance(value, (list, tuple)):
            items = [self.template(item) for item in value]
            return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
        if isinstance(value, dict):
            return {key: self.template(item) for key, item in value.items()}
        if isinstance(value, _PYTHON_VALUES):
            return value
        raise tracing.FallbackRequired("the forward returns a %s, not arrays and Python values"
                                       % type(value).__name__, self.where)

    def _output(self, symbol):
        # One array held twice (`return x, x`; `y = x` passed on by a part of a split
        # forward) is one array after the run too, as imperatively.
        if id(symbol) not in self._positions:
            self._positions[id(symbol)] = len(self.symbols)
            self.symbols.append(symbol)    # keeps the id unique
        return _Output(self._positions[id(symbol)])


def holds_alias(template):
    """Whether a template returns one of the call's mutable arguments."""
    if isinstance(template, _Alias):
        return True
    if isinstance(template, (list, tuple)):
        return any(holds_alias(item) for item in template)
    return isinstance(template, dict) and any(holds_alias(item) for item in template.values())


def arrays_layout(template):
    """(layout, count) of a template made of graph outputs only, in plain lists and
    tuples (recursion/output_type.py's layout: None for one array, else (list or
    tuple, (layout per item, ...))), or None for any other value."""
    if type(template) is _Output:
        return None, 1
    if type(template) in (list, tuple) and template:
        items = [arrays_layout(item) for item in template]
        if any(item is None for item in items):
            return None
        return ((type(template), tuple(layout for layout, _ in items)),
                sum(count for _, count in items))
    return None


def rebuild_outputs(template, results, mutables=()):
    """A value from its template, the graph's outputs and the call's mutable arguments."""
    if isinstance(template, _Output):
        return results[template]
    if isinstance(template, _Number):
        return python_value(results[template.position], template.value_type)
    if isinstance(template, _Alias):
        return mutables[template]
    if isinstance(template, (list, tuple)):
        items = rebuild_items(template, results, mutables)
        return type(template)(*items) if hasattr(template, "_fields") else type(template)(items)
    if isinstance(template, dict):
        return {key: rebuild_outputs(item, results, mutables) for key, item in template.items()}
    return template


def rebuild_items(templates, results, mutables=()):
    """The list items of `templates`: an element appended under a branch on a tensor
    (or rows a graph loop appended) gives as many items as the run appended."""
    items = []
    for item in templates:
        if isinstance(item, _Present):
            items += item.elements(results)
        else:
            items.append(rebuild_outputs(item, results, mutables))
    return items
