"""tvm_bridge: running MXNet Symbol graphs, wholly or in part, through TVM Relax.

Graphs: load a graph, partition it into TVM-convertible and MXNet segments,
and build Relax modules for the TVM ones.
"""
from .converters import Unsupported, converted_ops
from .graph import Graph, Node, load_graph
from .partition import Segment, partition
from .relax_builder import build_graph_module, build_segment

__all__ = ["Graph", "Node", "Segment", "Unsupported", "build_graph_module", "build_segment",
           "converted_ops", "load_graph", "partition"]
