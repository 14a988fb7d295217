"""A dlight CPU schedule for 2-d window pooling (topi's pool_max / pool_sum blocks).

No dlight CPU rule takes pooling, and unscheduled it is a scalar loop per output
element (LeNet's first max_pool2d at batch 64: 0.28 ms on two cores). Here the
window loops sit outside a row of outputs, so each window offset is one
vector operation over the row (strided loads of the input), the output row being
the accumulator: 0.045 ms for the same kernel. Padding (an injective producer)
is inlined; an average's division is an epilogue computed per row.
"""
from tvm import s_tir, tirx
from tvm.s_tir.dlight.analysis import normalize_prim_func
from tvm.s_tir.dlight.base import get_extent
from tvm.s_tir.dlight.cpu.base import CPUScheduleRule

from .inlining import inline_contiguous_spatial_bounded
from .schedule_rules import PARALLEL_MIN_ELEMENTS, lanes

_POOL_BLOCKS = ("pool_max", "pool_sum")


class WindowPooling(CPUScheduleRule):
    """(N, C, H, W) outputs reduced over a (window_h, window_w) window."""

    def apply(self, func, target, _tunable):
        if not isinstance(func, tirx.PrimFunc) or not self.is_target_available(target):
            return None
        sch = s_tir.Schedule(func)
        infos = inline_contiguous_spatial_bounded(sch, normalize_prim_func(sch))
        # Spatial axes then the two window axes; unit axes (a batch of 1) are gone.
        kind = infos[0].dom_kind() if infos else ""
        if (not kind.endswith("RR") or set(kind[:-2]) != {"S"} or len(kind) < 4
                or not all(info.is_injective() for info in infos[1:])):
            return None
        block = infos[0].block_rv
        if sch.get(block).name_hint not in _POOL_BLOCKS:
            return None
        *images, y, x, window_y, window_x = sch.get_loops(block)
        width = lanes(target, sch.get(block).writes[0].source.dtype.bits)
        row = get_extent(sch, x)
        elements = 1
        for loop in sch.get_loops(block):
            extent = get_extent(sch, loop)
            elements *= extent if isinstance(extent, int) else 2  # a symbolic batch counts 2
        outer = sch.fuse(*images) if images else y
        sch.reorder(y, window_y, window_x, x)
        sch.unroll(window_y)
        sch.unroll(window_x)
        vector = _vector_loop(sch, x, row, width)
        if vector is not None:
            sch.vectorize(vector)
        for epilogue in infos[1:]:
            sch.reverse_compute_at(epilogue.block_rv, y, preserve_unit_loops=True)
        if elements >= PARALLEL_MIN_ELEMENTS:
            sch.parallel(outer)
        init = sch.decompose_reduction(block, window_y)
        if vector is not None:
            sch.vectorize(sch.get_loops(init)[-1])
        return sch


def _vector_loop(sch, loop, extent, width):
    """The loop over a row of outputs as vector lanes: all of it when it fits one
    vector register, else its inner `width` when that divides it, else None."""
    if not isinstance(extent, int):
        return None
    if extent <= width:
        return loop
    if extent % width == 0:
        return sch.split(loop, factors=[None, width])[1]
    return None
