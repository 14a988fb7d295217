"""Recorded graphs rewritten so that MXNet 1.9.1's static_alloc backward is right.

MXNet sums the gradients of a node output read n times (n summands; a graph output
counts once more) with one ElementWiseSum node when n is below
MXNET_EXEC_INPLACE_GRAD_SUM_CAP (8 unless set), else with a chain of `_grad_add`
nodes (src/executor/graph_executor.cc, AggregateGradient). A backward with planned
memory (a CachedOp with static_alloc, and the legacy Executor) turns the links of
such a chain into in-place sums (src/executor/inplace_addto_detect_pass.cc): the
node computing a summand writes into the running sum with req kAddTo. An operator
that does not honour kAddTo corrupts the sum: `_backward_mean` adds its gradient,
then divides the whole buffer by the number of elements it averaged, the summands
written before it included (ReduceAxesBackwardUseNone<normalize=true>,
src/operator/tensor/broadcast_reduce_op.h). The backward without static_alloc
runs the `_grad_add` nodes as written and is right.

`bound_reads` rewrites a graph so that no node output has that many summands: the
readers of such an output read it through a tree of `identity` nodes, each read
fewer times. MXNet then sums every gradient with ElementWiseSum, and the planned
backward holds no in-place sum at all, whatever operators the graph has. The
forward computes the same values and each identity's gradient is its output's.
"""
import json
import os
import warnings

from ... import graph_json

# MXNet reads the variable once per process, when it first builds a backward graph.
CAP_VARIABLE, DEFAULT_CAP = "MXNET_EXEC_INPLACE_GRAD_SUM_CAP", 8


def inplace_sum_cap():
    """The number of summands from which MXNet sums a gradient in place."""
    return int(os.environ.get(CAP_VARIABLE, DEFAULT_CAP))


def _merged(graph):
    """Per node, the index of the first node MXNet may merge it with before it
    plans memory: its common expression elimination merges nodes of one operator
    with equal attributes and inputs (src/executor/eliminate_common_expr_pass.cc;
    not all such nodes, so this is an upper bound of what it merges)."""
    first, seen = [], {}
    for index, node in enumerate(graph["nodes"]):
        if not node["inputs"]:
            first.append(index)
            continue
        key = (node["op"], json.dumps(node.get("attrs", {}), sort_keys=True),
               tuple((first[entry[0]], entry[1]) for entry in node["inputs"]))
        first.append(seen.setdefault(key, index))
    return first


def _readers(graph, merged):
    """{(node index, output index): [readers]} of a JSON graph whose nodes MXNet
    merges as `merged` says (keyed by the first node of each merged group); a
    reader is (node index, input position), or ("head", position) for a graph
    output. A group of merged readers reads once."""
    readers = {}
    for index, node in enumerate(graph["nodes"]):
        if merged[index] != index:
            continue
        for position, entry in enumerate(node["inputs"]):
            readers.setdefault((merged[entry[0]], entry[1]), []).append((index, position))
    for position, entry in enumerate(graph["heads"]):
        readers.setdefault((merged[entry[0]], entry[1]), []).append(("head", position))
    return readers


def inplace_sums(symbol, cap=None):
    """The node outputs of `symbol` whose gradients MXNet's static_alloc backward
    may sum in place: {"node name" (with "[output]" past the first): summands}."""
    cap = inplace_sum_cap() if cap is None else cap
    graph = json.loads(symbol.tojson())
    return {graph["nodes"][node]["name"] + ("[%d]" % output if output else ""): len(readers)
            for (node, output), readers in _readers(graph, _merged(graph)).items()
            if len(readers) >= cap}


class CannotBound(ValueError):
    """A cap below 3 leaves no room for a tree of identities."""


# A node attribute MXNet's operators ignore (a name between double underscores):
# nodes whose values differ in it are never merged.
_UNMERGED = "__gluon_dyn_unmerged__"


def bound_reads(symbol, cap=None):
    """`symbol` with every node output it reads `cap` or more times (as a graph
    output too) read through a tree of identity nodes, each output then read
    fewer than `cap` times; `symbol` itself when it has no such output. Nodes
    MXNet would merge (and so read more often) are kept apart."""
    cap = inplace_sum_cap() if cap is None else cap
    graph = json.loads(symbol.tojson())
    if not inplace_sums(symbol, cap):
        return symbol
    if cap < 3:
        raise CannotBound("%s=%d: even a tree of identity nodes sums %d gradients of "
                          "some node output" % (CAP_VARIABLE, cap, cap))
    nodes = graph["nodes"]
    for index, first in enumerate(_merged(graph)):
        if first != index:
            nodes[index] = dict(nodes[index], attrs=dict(nodes[index].get("attrs", {}),
                                                         **{_UNMERGED: str(index)}))
    identities = {}   # producer's index -> the identity nodes placed right after it

    def identity_of(entry, producer):
        placed = identities.setdefault(producer, [])
        name = "%s_read%d" % (nodes[producer]["name"], len(placed))
        placed.append({"op": "identity", "name": name, "inputs": [entry],
                       "attrs": {_UNMERGED: name}})
        return [placed[-1], 0, 0]

    def spread(entry, readers, producer):
        """Point `readers` at `entry` (a [node, output, 0] reference) or at
        identities of it, fewer than `cap` at each."""
        for start in range(min(cap - 1, len(readers))):
            group = readers[start::cap - 1]
            if len(group) == 1:
                kind, position = group[0]
                (graph["heads"] if kind == "head" else nodes[kind]["inputs"])[position] = entry
            else:
                spread(identity_of(entry, producer), group, producer)

    unmerged = list(range(len(nodes)))
    for (node, output), readers in _readers(graph, unmerged).items():
        if len(readers) >= cap:
            # An identity of a graph input copies it (MXNet plans no node in place on
            # an input); an identity of a node's output shares its memory. So a
            # crowded input is copied once, and the tree spreads from the copy.
            entry = [node, output, 0]
            spread(identity_of(entry, node) if nodes[node]["op"] == "null" else entry,
                   readers, node)
    return graph_json.load_symbol(graph_json.with_nodes_after(graph, identities))


def planned_recording(symbol, flags):
    """(graph, CachedOp flags) of a recorded run of `symbol` with memory planned
    by `flags`: the graph with its reads bounded; or, where MXNet's cap leaves no
    room for that, `symbol` without planned memory, said once."""
    try:
        return bound_reads(symbol), flags
    except CannotBound as error:
        warnings.warn("gluon_dyn: recorded graphs run without planned memory (static_alloc): "
                      "%s, and MXNet's planned backward sums such gradients in place, which "
                      "some operators get wrong (gluon_dyn/hybridize/passes/gradient_sums.py)" % error)
        return symbol, []
