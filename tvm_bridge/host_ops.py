"""Operators a plan runs on the host, with numpy, between its TVM segments.

A boolean_mask alone in its segment (its output shape is known only once it ran,
so it never compiles) would run as an MXNet operator whose output the next TVM
segment must wait for: a round trip through MXNet's threaded engine, ~40 us on a
busy 2-core machine. With numpy it reads both arrays in place (DLPack: MXNet's
arrays or TVM's tensors) and writes the kept rows into memory aligned as TVM
needs, given on as a TVM tensor without a copy: ~15 us. Inference only, as plans
are.
"""
import mxnet as mx
import numpy as np
import tvm

from .observed_types import TypesChanged
from .runtime import TVM_ALIGNMENT

MASK_OPS = ("_contrib_boolean_mask", "_npi_boolean_mask")


class _Readable:
    """An NDArray as numpy reads it through DLPack, once MXNet's writes are done."""
    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return mx.nd.to_dlpack_for_read(self.array)

    @staticmethod
    def __dlpack_device__():
        return (1, 0)  # kDLCPU


def host_step(graph, segment):
    """`run(*arrays) -> [NDArray]` for a segment numpy runs (its inputs in
    `segment.inputs` order), or None."""
    if len(segment.nodes) != 1 or graph.nodes[segment.nodes[0]].op not in MASK_OPS:
        return None
    node = graph.nodes[segment.nodes[0]]
    data, mask = (segment.inputs.index(ref) for ref in node.inputs)
    axis = int(node.attrs.get("axis", 0))

    def masked(*arrays):
        keep = _numpy(arrays[mask]) != 0
        rows = int(np.count_nonzero(keep))
        if not rows:
            # An empty array has an unknown shape to MXNet 1.9.1; what follows
            # fails or runs only as MXNet runs it (a Dense on no rows raises).
            raise TypesChanged("%s kept no rows" % node.name)
        values = _numpy(arrays[data])
        kept = _aligned_empty(values.shape[:axis] + (rows,) + values.shape[axis + 1:],
                              values.dtype)
        np.compress(keep, values, axis=axis, out=kept)
        return [tvm.runtime.from_dlpack(kept)]
    return masked


def _numpy(array):
    """An NDArray or TVM tensor as numpy reads it in place."""
    return np.from_dlpack(_Readable(array) if isinstance(array, mx.nd.NDArray) else array)


def _aligned_empty(shape, dtype):
    """An empty array whose data TVM takes without a copy (TVM_ALIGNMENT bytes aligned)."""
    size = int(np.prod(shape)) * dtype.itemsize
    raw = np.empty(size + TVM_ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % TVM_ALIGNMENT
    return raw[start:start + size].view(dtype).reshape(shape)
