"""The order nodes run in: by height (a node runs once everything it calls has),
nodes of one height and one body together as one group (one call), as the
level-by-level batching of TensorFlow Fold. A body that cannot be batched
(batch_axes.py) runs a group per node."""
import collections

import mxnet as mx
import numpy as np


class Group:
    """Nodes of one body run by one call; `rows` the (calls, nodes) row indices
    of their callees' results, a view into the call's index array."""
    __slots__ = ("body", "invocations", "offset", "rows")

    def __init__(self, body, invocations, offset):
        self.body, self.invocations, self.offset = body, invocations, offset
        self.rows = None


def schedule(invocations, entry):
    """The groups that run `invocations` (callees before callers) and then `entry`,
    in order, each node given its row in its function's arena (row 0 holds zeros)."""
    by_height = collections.defaultdict(dict)
    for invocation in invocations:
        by_height[invocation.height].setdefault(invocation.body, []).append(invocation)
    next_row = collections.defaultdict(lambda: 1)
    groups, indices = [], []
    for height in sorted(by_height):
        for body, members in by_height[height].items():
            graph = body.graph
            for chunk in [members] if graph.batched else [[member] for member in members]:
                start = next_row[graph.appends_to]
                for position, invocation in enumerate(chunk):
                    invocation.row = start + position
                next_row[graph.appends_to] = start + len(chunk)
                groups.append(_group(body, chunk, indices))
    groups.append(_group(entry.body, [entry], indices))
    if not indices:
        return groups
    flat = np.concatenate(indices)
    array = mx.nd.empty(flat.shape, dtype=np.int32)
    array[:] = flat
    for group in groups:
        calls, nodes = len(group.body.slots), len(group.invocations)
        if calls:
            group.rows = array[group.offset:group.offset + calls * nodes].reshape((calls, nodes))
    return groups


def _group(body, invocations, indices):
    offset = sum(len(block) for block in indices)
    if body.slots:
        indices.append(np.array([[invocation.children[slot].row for invocation in invocations]
                                 for slot in range(len(body.slots))], np.int32).ravel())
    return Group(body, invocations, offset)
