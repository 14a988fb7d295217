"""tvm_bridge: running MXNet Symbol graphs, wholly or in part, through TVM Relax.

Graphs: load a graph, partition it into TVM-convertible and MXNet segments,
and build Relax modules for the TVM ones.
Compiling: compile_module (cached on disk), tune_module, CompiledFunction
(called with MXNet NDArrays through DLPack); and deploy as modules. Matrix
products run on TVM's generated kernels, or on the mxnet wheel's OpenBLAS where
that measured faster per product shape (external_gemms.py, gemm_choice.py, blas.py).
Running: SegmentedGraph (TVM where faster, MXNet elsewhere); compile_block for a
static HybridBlock, whose export load_plan (deploy_loader.py, standalone with
runtime.py) runs without this package.
"""
from gluon_dyn.native import ndarray_versions_reader

from . import ndarray_exchange, runtime
from .block import CompiledBlock, compile_block
from .compiler import compile_module
from .converters import Unsupported, converted_ops
from .deploy_loader import DeployedPlan, load_plan
from .graph import Graph, Node, load_graph
from .partition import Segment, partition
from .relax_builder import build_graph_module, build_segment
from .runtime import CompiledFunction
from .segmented import SegmentedGraph
from .target import host_target
from .tuning import tune_module

__all__ = ["CompiledBlock", "CompiledFunction", "DeployedPlan", "compile_block", "Graph", "Node",
           "Segment", "Unsupported", "build_graph_module", "build_segment", "compile_module",
           "converted_ops", "host_target", "load_graph", "load_plan", "partition",
           "SegmentedGraph", "tune_module"]

# Prepared parameters are kept until MXNet reports a write to them.
runtime.array_versions_reader = ndarray_versions_reader
# Inputs are viewed, and results made NDArrays, in one C call each.
runtime.ndarray_cpu_view = ndarray_exchange.cpu_view
runtime.ndarrays_of_tvm = ndarray_exchange.ndarrays_of_tvm
# A compiled function's whole call in one C call where it can be.
runtime.tvm_caller = ndarray_exchange.tvm_caller
