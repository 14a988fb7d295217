"""The order nodes run in: the down stages (passes.py) by depth, root first (a
node's runs once its callers' have), then the up stages by height (a node's runs
once everything it calls has), nodes of one depth or height and one body
together as one group (one batched call), as the level-by-level batching of
TensorFlow Fold. A stage that cannot be batched (batch_axes.py) runs a group per
node; nodes reading different whole arrays (two sentences) run in different groups.

`schedule` groups a call's nodes in one pass; the sequence of the groups'
graphs (with which of the entry's shared arrays each reads) is the schedule's
`key`: calls with the same key run the same whole-call program
(call_program.py), whatever their trees' widths. `place` then gives every node
its rows in its function's arenas and gathers the row indices each group reads
(BatchedGraph.blocks) into one flat int32 array (each group reads its own
stretch of it). A group may be given more rows than it has nodes (its
capacity): the rows past its nodes read row 0 (zeros) and their results are
never read, so that a program sees the same shapes call after call.

Placed bucketed (group by group), a group's capacity is a power of two (for
inference; training runs its nodes' rows, program_cache.py), every arena has a
power of two rows from the start (`arena_rows`, the most recent calls needed,
unless over four times this call's) and a group writes its rows into it at
the row indices `written` gives (BatchedGraph.scattered) instead of appending
them, so that a body's graph meets a few input shapes over a stream of new
trees and runs without MXNet planning its memory again
(execution.ShapeKeyedRunner).
"""
import numpy as np

from .batched_graph import DOWN
from .passes import Passed, passed_of


class Group:
    """Nodes of one body run by one call of one of its stages (`graph`), on
    `capacity` rows (at least one per node). The row indices it reads are
    `indices[start:start + size]` of the schedule, block by block (the
    (blocks, capacity) matrix, flat). `variant`: which of the entry's shared
    arrays each whole input of the body is (a part of the schedule key).
    `written`: placed bucketed, per write of its graph, the (start, size) of
    the stretch of `indices` holding the rows it writes. `host_values`: own
    inputs made for the call's run (execution.prepare_host_values)."""
    __slots__ = ("body", "graph", "invocations", "capacity", "start", "variant", "written",
                 "host_values")

    def __init__(self, body, graph, invocations, variant):
        self.body, self.graph, self.invocations, self.variant = body, graph, invocations, variant
        self.capacity, self.start, self.written = len(invocations), 0, ()
        self.host_values = {}

    @property
    def blocks(self):
        return len(self.graph.blocks)

    @property
    def size(self):
        """How many row indices the group reads."""
        return len(self.graph.blocks) * self.capacity


class Schedule:
    """`groups` in the order they run (the entry's up stage last), `key` the
    tuple of their (graph, variant), `indices` the row indices every group reads
    (np.int32, once placed); placed bucketed, `arena_rows`: the rows of each
    arena."""
    __slots__ = ("groups", "key", "indices", "arena_rows")

    def __init__(self, groups):
        self.groups, self.indices, self.arena_rows = groups, None, None
        self.key = tuple((group.graph, group.variant) for group in groups)

    def place(self, capacities=None, arena_rows=None, exact=False):
        """Gives each node its rows in its function's arenas (row 0 holds zeros)
        and makes `indices`; group i takes max(its nodes, capacities[i]) rows.
        With `arena_rows` (the rows each arena had in recent calls, updated),
        bucketed: a power of two of them (its nodes' with `exact`, as training
        runs), written into arenas of a power of two rows (module doc)."""
        bucketed = arena_rows is not None
        next_row, indices = {}, []
        for number, group in enumerate(self.groups):
            if capacities is not None and capacities[number] > group.capacity:
                group.capacity = capacities[number]
            if bucketed and not exact:
                group.capacity = power_of_two(group.capacity)
            graph = group.graph
            if graph.writes is not None:
                firsts = {arena: next_row.get(arena, 1) for arena, _ in graph.writes} \
                    if bucketed else None
                if graph.stage == DOWN:
                    _place_passes(group, next_row)
                else:
                    arena = graph.writes[0][0]
                    row = next_row.get(arena, 1)
                    for invocation in group.invocations:
                        invocation.row = row
                        row += 1
                    next_row[arena] = next_row.get(arena, 1) + group.capacity
            group.start = len(indices)
            padding = [0] * (group.capacity - len(group.invocations))
            for kind, index in graph.blocks:
                if kind == "slot":
                    indices.extend([invocation.children[index].row
                                    for invocation in group.invocations])
                elif kind == "received":
                    indices.extend([invocation.arrays[index].row
                                    for invocation in group.invocations])
                elif kind == "node":
                    indices.extend([invocation.passes[0].row if graph.stage == DOWN
                                    else invocation.row for invocation in group.invocations])
                else:
                    indices.extend([invocation.passes[index].row
                                    for invocation in group.invocations])
                indices.extend(padding)
            if bucketed and graph.writes is not None:
                # The arrays of one arena (an UP stage's results) share its rows.
                stretches = {}
                for arena, first in firsts.items():
                    stretches[arena] = (len(indices), next_row[arena] - first)
                    indices.extend(range(first, next_row[arena]))
                group.written = [stretches[arena] for arena, _ in graph.writes]
        self.indices = np.array(indices, dtype=np.int32)
        if bucketed:
            self.arena_rows = {arena: _settled(arena_rows, arena, power_of_two(rows))
                               for arena, rows in next_row.items()}


def _place_passes(group, next_row):
    """Rows for what the group's down stage computes, in the order its graph
    appends them (BatchedGraph.pass_rows)."""
    body = group.body
    for arena, outputs in group.graph.pass_rows:
        row = next_row.get(arena, 1)
        for k in outputs:
            shape, dtype = body.down.outputs[k]
            for offset, invocation in enumerate(group.invocations):
                passed_of(invocation.passes, ("computed", k, shape, dtype, False),
                          body.function, invocation.arrays).row = row + offset
            row += group.capacity
        next_row[arena] = row


def power_of_two(count):
    """The least power of two at least `count` (>= 1)."""
    return 1 << (count - 1).bit_length()


def _settled(arena_rows, arena, rows):
    """The rows `arena` is given: as many as recent calls gave it (`arena_rows`),
    unless this call needs more (`rows`) or that is over four times as many."""
    kept = arena_rows.get(arena, 0)
    if rows <= kept <= 4 * rows:
        return kept
    arena_rows[arena] = rows
    return rows


def schedule(invocations, entry):
    """The Schedule that runs `invocations` (callees before callers) and then
    `entry`; not yet placed."""
    levels, down = {}, {}
    for invocation in invocations:
        _add(levels, invocation.height, invocation)
    for invocation, depth in _depths(entry):
        if invocation.body.down is not None:
            _add(down, depth, invocation)
    groups = []
    for stages, graph_of in ((down, lambda body: body.down_graph),
                             (levels, lambda body: body.graph)):
        for level in sorted(stages):
            bodies = stages[level]
            # Bodies in a fixed order, so that calls with the same bodies per level
            # have the same key.
            for body in sorted(bodies, key=_number):
                graph = graph_of(body)
                for variant, members in _by_whole_inputs(graph, bodies[body]):
                    if graph.batched:
                        groups.append(Group(body, graph, members, variant))
                    else:
                        groups.extend(Group(body, graph, [member], variant)
                                      for member in members)
    groups.append(Group(entry.body, entry.body.graph, [entry], ()))
    return Schedule(groups)


def _add(levels, level, invocation):
    bodies = levels.get(level)
    if bodies is None:
        bodies = levels[level] = {}
    members = bodies.get(invocation.body)
    if members is None:
        bodies[invocation.body] = [invocation]
    else:
        members.append(invocation)


def _depths(entry):
    """(node, its depth) of every node, the entry (depth 0) first."""
    pending = [(entry, 0)]
    while pending:
        invocation, depth = pending.pop()
        yield invocation, depth
        pending.extend((child, depth + 1) for child in invocation.children)


def _by_whole_inputs(graph, members):
    """(variant, nodes) per distinct set of whole arrays the nodes read: one group
    reads one array per whole input, except arrays the graph only picks rows of,
    which a group reads one after the other (BatchedGraph.gathered). Arrays by
    identity."""
    split = [index for index in graph.whole if index not in graph.gathered]
    found = {}
    for member in members:
        key = tuple(id(member.arrays[index]) for index in split)
        found.setdefault(key, []).append(member)
    return [(_variant(graph, nodes), nodes) for nodes in found.values()]


def distinct_arrays(invocations, index):
    """The arrays own input `index` of `invocations` holds, each once, in order."""
    seen, found = set(), []
    for invocation in invocations:
        value = invocation.arrays[index]
        if id(value) not in seen:
            seen.add(id(value))
            found.append(value)
    return found


def _variant(graph, invocations):
    """Which of the entry's shared arrays each whole input of the group's nodes is
    (("shared", (k, ...))), or that it is an array of the Python data (("array",))."""
    variant = []
    for index in graph.whole:
        values = distinct_arrays(invocations, index)
        variant.append(("shared", tuple(value.index for value in values))
                       if isinstance(values[0], Passed) else ("array",))
    return tuple(variant)


def _number(body):
    return body.number
