"""The order nodes run in: by height (a node runs once everything it calls has),
nodes of one height and one body together as one group (one batched call), as
the level-by-level batching of TensorFlow Fold. A body that cannot be batched
(batch_axes.py) runs a group per node.

One pass over the call's nodes gives every group, each node's row in its
function's arena, and the row indices of every group's callees as one flat
int32 array (each group reads its own stretch of it). The sequence of the
groups' bodies is the schedule's `key`: calls with the same key run the same
whole-call program (call_program.py), whatever their trees' widths.
"""
import numpy as np


class Group:
    """Nodes of one body run by one call. Their callees' rows are
    `indices[start:start + calls * nodes]` of the schedule, slot by slot
    (the (calls, nodes) matrix, flat)."""
    __slots__ = ("body", "invocations", "start")

    def __init__(self, body, invocations, start):
        self.body, self.invocations, self.start = body, invocations, start

    @property
    def calls(self):
        return len(self.body.slots)

    @property
    def size(self):
        """How many row indices the group reads."""
        return len(self.body.slots) * len(self.invocations)


class Schedule:
    """`groups` in the order they run (the entry's last), `key` the tuple of
    their bodies, `indices` the callees' rows of every group (np.int32)."""
    __slots__ = ("groups", "key", "indices")

    def __init__(self, groups, indices):
        self.groups, self.indices = groups, indices
        self.key = tuple(group.body for group in groups)


def schedule(invocations, entry):
    """The Schedule that runs `invocations` (callees before callers) and then
    `entry`, each node given its row in its function's arena (row 0 holds zeros)."""
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
    next_row, groups, indices = {}, [], []
    for height in sorted(levels):
        bodies = levels[height]
        # Bodies in a fixed order, so that calls with the same bodies per height
        # have the same key.
        for body in sorted(bodies, key=_number):
            members = bodies[body]
            graph = body.graph
            arena = graph.appends_to
            for chunk in [members] if graph.batched else [[member] for member in members]:
                row = next_row.get(arena, 1)
                for invocation in chunk:
                    invocation.row = row
                    row += 1
                next_row[arena] = row
                groups.append(_group(body, chunk, indices))
    groups.append(_group(entry.body, [entry], indices))
    return Schedule(groups, np.array(indices, dtype=np.int32))


def _number(body):
    return body.number


def _group(body, invocations, indices):
    start = len(indices)
    for slot in range(len(body.slots)):
        indices.extend([invocation.children[slot].row for invocation in invocations])
    return Group(body, invocations, start)
