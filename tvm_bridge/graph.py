"""MXNet Symbol graphs as plain Python objects (nodes in topological order).

A value is referred to as ``(node_index, output_index)``. Graph variables are
nodes whose ``op`` is ``"null"``; their single value is ``(index, 0)``.
"""
import json
import os
from dataclasses import dataclass

import mxnet as mx

# Nested subgraphs carry no version stamp; without one MXNet logs an "upgrade"
# message every time one is loaded.
_VERSION_STAMP = {"mxnet_version": ["int", 10901]}


@dataclass(repr=False)
class Node:
    """One operator (or variable) of a graph, as MXNet's JSON describes it."""

    op: str  # "null" for a variable
    name: str
    attrs: dict  # attribute strings as MXNet writes them
    inputs: list  # value refs (node index, output index)
    num_outputs: int
    subgraphs: list  # Graphs nested in control-flow nodes

    @property
    def is_variable(self):
        return self.op == "null"

    def to_json(self, inputs):
        """This node as a JSON dict whose inputs are the given value refs."""
        entry = {"op": self.op, "name": self.name,
                 "inputs": [[i, o, 0] for i, o in inputs]}
        if self.attrs:
            entry["attrs"] = dict(self.attrs)
        if self.subgraphs:
            entry["subgraphs"] = [g.json for g in self.subgraphs]
        return entry

    def __repr__(self):
        return "Node(%s %r)" % (self.op, self.name)


class Graph:
    """Nodes in topological order, output refs (``heads``) and input names."""

    def __init__(self, json_dict, arg_names, aux_names):
        self.json = json_dict
        row_ptr = json_dict["node_row_ptr"]
        self.nodes = [
            Node(op=entry["op"], name=entry["name"], attrs=dict(entry.get("attrs", {})),
                 inputs=[(i, o) for i, o, _ in entry["inputs"]],
                 num_outputs=row_ptr[k + 1] - row_ptr[k],
                 subgraphs=[_graph_from_dict(g) for g in entry.get("subgraphs", [])])
            for k, entry in enumerate(json_dict["nodes"])]
        self.heads = [(i, o) for i, o, _ in json_dict["heads"]]
        self.arg_names = list(arg_names)
        self.aux_names = list(aux_names)
        self.variable_index = {n.name: k for k, n in enumerate(self.nodes) if n.is_variable}

    @property
    def input_names(self):
        """Variable names in MXNet's ``list_inputs`` order (node order)."""
        return [n.name for n in self.nodes if n.is_variable]

    def value_name(self, ref):
        """A readable name of a value, e.g. ``fc0`` or ``split0[1]``."""
        node = self.nodes[ref[0]]
        return node.name if node.num_outputs == 1 else "%s[%d]" % (node.name, ref[1])

    def holds_ops(self, ops):
        """Whether a node of one of ``ops`` is in the graph or in a nested subgraph."""
        return any(node.op in ops or any(g.holds_ops(ops) for g in node.subgraphs)
                   for node in self.nodes)

    def consumers(self):
        """For each value ref, the indices of the nodes that read it."""
        readers = {}
        for k, node in enumerate(self.nodes):
            for ref in node.inputs:
                readers.setdefault(ref, []).append(k)
        return readers

    def weight_like_inputs(self):
        """Names of the variables that no node reads as its first input and that
        are no output: where an operator takes data first and weights after it
        (FullyConnected, Convolution, BatchNorm, Embedding, ...), the weights."""
        first_inputs = {node.inputs[0] for node in self.nodes if node.inputs}
        return [node.name for k, node in enumerate(self.nodes) if node.is_variable
                and (k, 0) not in first_inputs and (k, 0) not in self.heads]

    def to_symbol(self, heads=None):
        """The MXNet Symbol of this graph, or of the given value refs as its outputs."""
        json_dict = self.json if heads is None else dict(
            self.json, heads=[[i, o, 0] for i, o in heads])
        return symbol_from_dict(json_dict)


def symbol_from_dict(json_dict):
    return mx.sym.load_json(json.dumps(dict(json_dict, attrs=_VERSION_STAMP)))


def _graph_from_dict(json_dict):
    """A Graph of a JSON dict, canonicalised by a round trip through MXNet."""
    symbol = symbol_from_dict(json_dict)
    canonical = json.loads(symbol.tojson())
    return Graph(canonical, symbol.list_arguments(), symbol.list_auxiliary_states())


def load_graph(symbol_or_json):
    """Parses an mx.sym.Symbol, a JSON string, or the path of a JSON file."""
    if isinstance(symbol_or_json, mx.sym.Symbol):
        text = symbol_or_json.tojson()
    elif isinstance(symbol_or_json, str) and symbol_or_json.lstrip().startswith("{"):
        text = symbol_or_json
    elif isinstance(symbol_or_json, (str, os.PathLike)):
        if not os.path.isfile(symbol_or_json):
            raise ValueError("load_graph: %r is neither JSON text nor a file" % (symbol_or_json,))
        with open(symbol_or_json) as f:
            text = f.read()
    else:
        raise TypeError("load_graph expects an mx.sym.Symbol, a JSON string or the path of "
                        "a JSON file, got %r" % (symbol_or_json,))
    try:
        json_dict = json.loads(text)
    except ValueError as err:
        raise ValueError("load_graph: not valid JSON: %s" % err) from None
    if "nodes" not in json_dict or "heads" not in json_dict:
        raise ValueError("load_graph: JSON has no 'nodes'/'heads': not an MXNet symbol graph")
    return _graph_from_dict(json_dict)
