"""The order nodes run in: by height (a node runs once everything it calls has),
nodes of one height and one body together as one group (one batched call), as
the level-by-level batching of TensorFlow Fold. A body that cannot be batched
(batch_axes.py) runs a group per node.

`schedule` groups a call's nodes in one pass; the sequence of the groups'
bodies is the schedule's `key`: calls with the same key run the same
whole-call program (call_program.py), whatever their trees' widths. `place`
then gives every node its row in its function's arena and gathers the row
indices of every group's callees into one flat int32 array (each group reads
its own stretch of it). A group may be given more rows than it has nodes (its
capacity): the rows past its nodes read row 0 (zeros) and their results are
never read, so that a program sees the same shapes call after call.
"""
import numpy as np


class Group:
    """Nodes of one body run by one call, on `capacity` rows (at least one per
    node). Their callees' rows are `indices[start:start + calls * capacity]` of
    the schedule, slot by slot (the (calls, capacity) matrix, flat)."""
    __slots__ = ("body", "invocations", "capacity", "start")

    def __init__(self, body, invocations):
        self.body, self.invocations = body, invocations
        self.capacity, self.start = len(invocations), 0

    @property
    def calls(self):
        return len(self.body.slots)

    @property
    def size(self):
        """How many row indices the group reads."""
        return len(self.body.slots) * self.capacity


class Schedule:
    """`groups` in the order they run (the entry's last), `key` the tuple of
    their bodies, `indices` the callees' rows of every group (np.int32, once
    placed)."""
    __slots__ = ("groups", "key", "indices")

    def __init__(self, groups):
        self.groups, self.indices = groups, None
        self.key = tuple(group.body for group in groups)

    def place(self, capacities=None):
        """Gives each node its row in its function's arena (row 0 holds zeros)
        and makes `indices`; group i takes max(its nodes, capacities[i]) rows."""
        next_row, indices = {}, []
        for number, group in enumerate(self.groups):
            if capacities is not None and capacities[number] > group.capacity:
                group.capacity = capacities[number]
            arena = group.body.graph.appends_to
            row = next_row.get(arena, 1)
            for invocation in group.invocations:
                invocation.row = row
                row += 1
            next_row[arena] = next_row.get(arena, 1) + group.capacity
            group.start = len(indices)
            padding = [0] * (group.capacity - len(group.invocations))
            for slot in range(len(group.body.slots)):
                indices.extend([invocation.children[slot].row
                                for invocation in group.invocations])
                indices.extend(padding)
        self.indices = np.array(indices, dtype=np.int32)


def schedule(invocations, entry):
    """The Schedule that runs `invocations` (callees before callers) and then
    `entry`; not yet placed."""
    levels = {}
    for invocation in invocations:
        bodies = levels.get(invocation.height)
        if bodies is None:
            bodies = levels[invocation.height] = {}
        members = bodies.get(invocation.body)
        if members is None:
            bodies[invocation.body] = [invocation]
        else:
            members.append(invocation)
    groups = []
    for height in sorted(levels):
        bodies = levels[height]
        # Bodies in a fixed order, so that calls with the same bodies per height
        # have the same key.
        for body in sorted(bodies, key=_number):
            members = bodies[body]
            if body.graph.batched:
                groups.append(Group(body, members))
            else:
                groups.extend(Group(body, [member]) for member in members)
    groups.append(Group(entry.body, [entry]))
    return Schedule(groups)


def _number(body):
    return body.number
