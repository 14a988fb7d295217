"""What the forward does to the lists, dicts and objects it is given, replayed after each run.

Imperatively, `states[layer] = new_state` inside a forward (GluonNLP's BiLMEncoder)
changes the caller's list, and `node.h = h` the caller's tree node. While tracing,
the forward changes the caller's containers holding graph variables; afterwards
each mutable argument's contents are compared with what the trace started from.
An item replaced, added or removed makes an ArgumentWrite: the new values' arrays
are graph outputs (templates of outputs.py), and after a run whose guards held the
executor gives the caller's container its new contents. Items the forward left in
place stay the caller's own objects.
"""
import dataclasses
import typing

from . import arguments
from .outputs import rebuild_items, rebuild_outputs


@dataclasses.dataclass(frozen=True)
class ArgumentWrite:
    """The new contents of mutable argument `index` (arguments.ArgumentLayout.mutables):
    for a list, one entry per item; for a dict or object, per key or attribute. An
    entry is (KEPT, what the item was at the trace's start: index or key) or
    (NEW, its template)."""
    index: int
    entries: typing.Any      # list of entries, or {key: entry}

    def apply(self, mutables, results):
        """Give the caller's container its new contents; `mutables` are the call's
        mutable arguments, resolved before any write."""
        mutable = mutables[self.index]
        before = arguments.contents(mutable)

        if isinstance(self.entries, list):
            # An append under a branch on a tensor gives an item or none.
            items = []
            for kind, what in self.entries:
                items += [before[what]] if kind == KEPT else \
                    rebuild_items([what], results, mutables)
            arguments.refill(mutable, items)
        else:
            arguments.refill(mutable, {
                key: before[what] if kind == KEPT else rebuild_outputs(what, results, mutables)
                for key, (kind, what) in self.entries.items()})


KEPT, NEW = "kept", "new"


def argument_writes(layout, traced, templates):
    """ArgumentWrites for the changes the trace made to layout.mutables, whose
    contents at the trace's start were `traced`; new values are templated by
    `templates` (outputs.OutputTemplates)."""
    writes = []
    for index, ((_, mutable), before) in enumerate(zip(layout.mutables, traced)):
        now = arguments.contents(mutable)
        if isinstance(now, list):
            entries = [_entry(item, before, templates, position)
                       for position, item in enumerate(now)]
            unchanged = [(KEPT, position) for position in range(len(before))]
        else:
            entries = {key: _entry(item, before, templates, key) for key, item in now.items()}
            unchanged = {key: (KEPT, key) for key in before}
        if entries != unchanged:
            writes.append(ArgumentWrite(index, entries))
    return writes


def _entry(item, before, templates, where):
    """(KEPT, where `item` was before) when it was there already, else (NEW, its
    template); `where`: its index or key now, where it most likely was."""
    try:
        if before[where] is item:
            return KEPT, where
    except (IndexError, KeyError):
        pass
    if isinstance(before, list):
        for position, old in enumerate(before):
            if old is item:
                return KEPT, position
    return NEW, templates.template(item)
