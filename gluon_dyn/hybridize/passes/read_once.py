"""Data inputs read by several operators, read once: inference graphs whose memory
and shapes MXNet plans (static_alloc and static_shape, parameters marked).

Such a CachedOp runs its operators as one bulked engine operation, except each
operator that reads a data input (an input not marked as a parameter) or writes a
graph output: MXNet 1.9.1 pushes that one alone (CachedOp::StaticInitExec sets up
no executor for it), about 3 us of the calling thread's time each, where bulked
operators cost nothing there. A recursion body's batched graph gathers each of
its arenas and its nodes' inputs with several `take`s, each reading a data input:
a Tree-LSTM body of 50 operators spent 87 us pushing its call instead of 47. One
`_copy` of such an input (pushed alone) and its readers reading the copy, bulked,
cost one push instead of one per reader. The values are the inputs' own.

Equivalent to::

    def read_once(symbol, data_indices):
        for name in data inputs read by two operators or more:
            readers of name read copy(name)
        return symbol    # the same inputs, in the same order
"""
import json

import mxnet as mx

from ... import graph_json

COPY_SUFFIX = "_read_once"


def read_once(symbol, data_indices):
    """`symbol` with each input at one of `data_indices` (positions in
    symbol.list_inputs()) that two operators or more read copied once, its readers
    reading the copy; `symbol` itself where there is none."""
    names = symbol.list_inputs()
    data = {names[index] for index in data_indices}
    graph = json.loads(symbol.tojson())
    readers = graph_json.readers(graph)
    placed, replacements = {}, {}
    for index, node in enumerate(graph["nodes"]):
        if node["op"] != "null" or node["name"] not in data:
            continue
        if sum(reader != "head" for reader, _ in readers.get((index, 0), ())) < 2:
            continue
        copy = graph_json.node("_copy", node["name"] + COPY_SUFFIX, [[index, 0, 0]])
        placed[index] = [copy]
        replacements[(index, 0)] = [copy, 0, 0]
    if not placed:
        return symbol
    graph_json.rewire(graph, replacements)     # the copies, not yet in the graph, keep theirs
    rewritten = graph_json.load_symbol(graph_json.with_nodes_after(graph, placed))
    if rewritten.list_inputs() != names:
        raise AssertionError("read_once changed the inputs of a graph: %s, not %s"
                             % (rewritten.list_inputs(), names))
    return rewritten


def planned_op(symbol, roles):
    """The CachedOp of an inference graph whose memory and shapes MXNet plans, its
    inputs' `roles` given (capture.input_roles: parameters and captured arrays
    marked as MXNet parameters), its data inputs read once."""
    return mx.nd.CachedOp(read_once(symbol, dict(roles)["data_indices"]),
                          flags=planned_flags(roles))


def planned_flags(roles):
    """planned_op's CachedOp flags, for a graph already read once."""
    return [("static_alloc", True), ("static_shape", True)] + roles
