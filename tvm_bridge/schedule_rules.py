"""dlight CPU schedule rules: matrix-vector style reductions, and transposes.

TVM 0.27's `dlight.cpu.GEMV` vectorises 64-128 spatial lanes around a fully
unrolled reduction: LLVM then takes 10 s for a (1,64)x(64,128) product and
minutes for (64,256), so it is not used. This rule covers the same kernels
(FullyConnected/matmul with small batch, plus fused elementwise epilogues) by
keeping the reduction loop outside a short vector of spatial lanes: contiguous
loads for weights stored (in, out), quick to compile for any layout.
PackedPanelGemm takes the matmuls packed_weights.py rewrote to read their weight
in panels, with register tiles that fit the register file. InlinedElementwise
takes kernels of elementwise work (an LSTM cell's gates), which no dlight CPU
rule schedules: unscheduled, each op wrote a full intermediate array.
"""
from tvm import s_tir, tirx
from tvm.s_tir.dlight.analysis import normalize_prim_func
from tvm.s_tir.schedule import ScheduleError
from tvm.s_tir.dlight.base import get_extent
from tvm.s_tir.dlight.cpu.base import CPUScheduleRule
from tvm.target.codegen import llvm_get_vector_width, target_has_features

from .inlining import inline_bounded, inline_contiguous_spatial_bounded
from .packed_weights import BLOCK as PACKED_BLOCK

_DEFAULT_VECTOR_BITS = 128
ROW_BLOCKS = (8, 6, 4, 2)
COLUMN_BLOCKS = (8, 4, 2)
# Packed panels: 4 rows first (measured on znver3: 4x2 vectors 79 GFLOP/s per core on
# 3200x512x2048, OpenBLAS 70; 8x2 spills and makes 38), else what divides the rows.
PACKED_ROW_BLOCKS = (4, 6, 5, 3, 2)
# Vector registers a packed tile leaves free: the weight vectors and a broadcast row value.
PACKED_SPARE_REGISTERS = 4
PARALLEL_MIN_WORK = 1 << 18
# Elementwise kernels do a few operations per element: parallel from this many.
PARALLEL_MIN_ELEMENTS = 1 << 16
TRANSPOSE_TILES = (16, 8)
# Packed weights larger than this (the smallest L2 measured: znver3's 512 KB) are walked
# column tiles first (PackedPanelGemm._tile_order).
COLUMN_TILES_FIRST_WEIGHT_BYTES = 512 * 1024


def _vector_bits(target):
    """The CPU's vector register width. llvm_get_vector_width says 512 for znver3,
    which has AVX2 only: x86 targets are asked for their features instead."""
    for feature, bits in (("avx512f", 512), ("avx", 256)):
        if target_has_features(feature, target):
            return bits
    bits = llvm_get_vector_width(target)
    return bits if bits > 0 else _DEFAULT_VECTOR_BITS


def lanes(target, dtype_bits=32):
    """Elements of `dtype_bits` bits in one vector register of `target`."""
    return max(_vector_bits(target) // dtype_bits, 1)


def _accumulators(target):
    """Vector accumulators per tile: as many as the CPU has vector registers
    (AVX-512 32, AVX2 16); measured on AVX2, 8x2 tiles ran faster than 6x2 or 4x4
    ones (LLVM interleaves the loads with the FMAs)."""
    return 32 if target_has_features("avx512f", target) else 16


def _work(sch, loops):
    """Iterations of the loop nest (multiply-adds of a matmul); symbolic dims count 1."""
    work = 1
    for loop in loops:
        extent = get_extent(sch, loop)
        work *= extent if isinstance(extent, int) else 1
    return work


def _bytes(buffer):
    """A buffer's size in bytes (symbolic dims count 1)."""
    elements = 1
    for dim in buffer.shape:
        elements *= int(dim) if isinstance(dim, tirx.IntImm) else 1
    return elements * buffer.dtype.bits // 8


def _first_divisor(extent, choices):
    """The first of `choices` dividing `extent` (a static int), else 1."""
    return next((n for n in choices if isinstance(extent, int) and extent % n == 0), 1)


class SpatialLanesReduction(CPUScheduleRule):
    """One reduction block (spatial axes then reduction axes) and injective epilogues:
    parallel over outer spatial tiles, reduction loops, then vector lanes innermost."""

    def _takes(self, block):  # pylint: disable=unused-argument
        return True

    @staticmethod
    def _tile_order(column_tile, row_tile, block):  # pylint: disable=unused-argument
        # Column tiles outermost: consecutive tiles read the same weight columns
        # (from cache), the rows they meet being the small operand.
        return column_tile, row_tile

    @staticmethod
    def _tile(rows_extent, vectors, target):
        """(rows, lane vectors) of a register tile for `rows_extent` rows (an int, or
        a symbolic extent) and `vectors` lane vectors per row."""
        rows = _first_divisor(rows_extent, ROW_BLOCKS)
        columns = _first_divisor(vectors, [n for n in COLUMN_BLOCKS
                                           if rows * n <= _accumulators(target)])
        return rows, columns

    def apply(self, func, target, _tunable):
        if not isinstance(func, tirx.PrimFunc) or not self.is_target_available(target):
            return None
        sch = s_tir.Schedule(func)
        infos = normalize_prim_func(sch)
        if infos is None:
            return None
        infos = inline_contiguous_spatial_bounded(sch, infos)
        if not infos or infos[0].is_injective() or not all(b.is_injective() for b in infos[1:]):
            return None
        reduction_info = infos[0]
        kind = reduction_info.dom_kind()
        num_spatial = len(kind) - len(kind.lstrip("S"))
        if num_spatial == 0 or set(kind[num_spatial:]) != {"R"}:
            return None
        block = reduction_info.block_rv
        if not self._takes(sch.get(block)):
            return None
        width = lanes(target, sch.get(block).writes[0].source.dtype.bits)
        loops = sch.get_loops(block)
        work = _work(sch, loops)
        spatial, reduction = loops[:num_spatial], loops[num_spatial:]
        inner_extent = get_extent(sch, spatial[-1])
        # A remainder would need a predicate inside the vector loop: leave such
        # kernels to the other rules.
        if not isinstance(inner_extent, int) or inner_extent % width:
            return None
        # Several independent accumulators per tile (a few rows times a few lane
        # vectors): one accumulator is a chain of dependent FMAs, bound by their
        # latency; rows also share each weight vector loaded.
        rows, columns = self._tile(get_extent(sch, spatial[-2]) if num_spatial > 1 else 1,
                                   inner_extent // width, target)
        tile, column, lane = sch.split(spatial[-1], factors=[None, columns, width])
        if rows > 1:
            row_tile, row = sch.split(spatial[-2], factors=[None, rows])
            order = self._tile_order(tile, row_tile, sch.get(block))
            sch.reorder(*order, *reduction, row, column, lane)
            outer = sch.fuse(*spatial[:-2], *order)
            sch.unroll(row)
        else:
            sch.reorder(tile, *reduction, column, lane)
            outer = sch.fuse(*spatial[:-1], tile)
        sch.unroll(column)
        if work >= PARALLEL_MIN_WORK:
            # Smaller kernels run faster on the calling thread than with a fork/join.
            sch.parallel(outer)
        sch.vectorize(lane)
        # Accumulate in a local tile (registers) and write it out once, instead of
        # a load and store of the output per reduction step.
        write_back = sch.cache_write(block, 0, "local")
        sch.reverse_compute_at(write_back, outer, preserve_unit_loops=True)
        sch.vectorize(sch.get_loops(write_back)[-1])
        for epilogue in infos[1:]:
            sch.reverse_compute_at(epilogue.block_rv, outer, preserve_unit_loops=True)
            sch.vectorize(sch.get_loops(epilogue.block_rv)[-1])
        if len(infos) > 1:
            # The epilogue reads the tile from registers: no full-size intermediate
            # (unless the product itself is an output too).
            try:
                sch.compute_inline(write_back)
            except ScheduleError:
                pass
        init = sch.decompose_reduction(block, reduction[0])
        sch.vectorize(sch.get_loops(init)[-1])
        return sch


class PackedPanelGemm(SpatialLanesReduction):
    """The matmuls packed_weights.py rewrote (a weight in panels of two lane
    vectors), with their epilogues. Tiles of a few rows times one or more panels
    fit the vector registers with room for the weight vectors: on AVX2 the 8x2
    tiles of the unpacked rule spill accumulators on every step."""

    def _takes(self, block):
        return block.name_hint == PACKED_BLOCK

    @staticmethod
    def _tile_order(column_tile, row_tile, block):
        # A weight larger than L2 is re-read from L3 by every row tile that walks all
        # its panels: then column tiles go outermost, and the panels a tile reads stay
        # in L2 while the row tiles pass them (znver5, one thread, 512x2048 weights:
        # 32 rows with an epilogue 219 GFLOP/s against 191; 3200 rows 165 against 120).
        # A smaller weight stays in L2 anyway, and row tiles outermost keep a tile's
        # rows in L1 while the panels stream past (the hidden-64 LSTM's fastest calls
        # 3-10% faster).
        weight = next(read.source for read in block.reads if len(read.source.shape) == 3)
        if _bytes(weight) > COLUMN_TILES_FIRST_WEIGHT_BYTES:
            return column_tile, row_tile
        return row_tile, column_tile

    @staticmethod
    def _tile(rows_extent, vectors, target):
        budget = _accumulators(target) - PACKED_SPARE_REGISTERS
        rows = _first_divisor(rows_extent, PACKED_ROW_BLOCKS)
        columns = max(n for n in (8, 4, 2, 1) if rows * n <= budget and vectors % n == 0)
        return rows, columns


class TiledTranspose(CPUScheduleRule):
    """A copy that reads its input in another axis order (a transposed weight):
    walked in square tiles, so the strided reads stay within a few cache lines.
    Untiled, LLVM's loop reads one element per cache line: 5.5 ms for a 2048x512
    weight (0.5 ms tiled), transposed on every call since weights are inputs."""

    def apply(self, func, target, _tunable):
        if not isinstance(func, tirx.PrimFunc) or not self.is_target_available(target):
            return None
        sch = s_tir.Schedule(func)
        infos = normalize_prim_func(sch)
        if infos is None or len(infos) != 1 or not infos[0].is_injective():
            return None
        block = infos[0].block_rv
        statement = sch.get(block)
        loops = sch.get_loops(block)
        if len(loops) < 2 or not statement.writes[0].region:  # a 0-d output has no axes
            return None
        innermost = statement.writes[0].region[-1].min
        if not isinstance(innermost, tirx.Var) or not any(
                isinstance(read.region[-1].min, tirx.Var) and
                not read.region[-1].min.same_as(innermost) for read in statement.reads):
            return None
        extents = [get_extent(sch, loop) for loop in loops[-2:]]
        size = next((n for n in TRANSPOSE_TILES if all(
            isinstance(extent, int) and extent % n == 0 for extent in extents)), None)
        if size is None:
            return None
        work = _work(sch, loops)
        row_tile, row = sch.split(loops[-2], factors=[None, size])
        column_tile, column = sch.split(loops[-1], factors=[None, size])
        sch.reorder(row_tile, column_tile, row, column)
        outer = sch.fuse(*loops[:-2], row_tile, column_tile)
        if work >= PARALLEL_MIN_WORK:
            sch.parallel(outer)
        sch.unroll(column)
        return sch


class InlinedElementwise(CPUScheduleRule):
    """Injective blocks only: each inlined into its readers, and every block left
    (those writing outputs) walked once, in vector lanes when its innermost axis
    holds whole vectors, parallel over outer elements when big."""

    def apply(self, func, target, _tunable):
        if not isinstance(func, tirx.PrimFunc) or not self.is_target_available(target):
            return None
        sch = s_tir.Schedule(func)
        infos = normalize_prim_func(sch)
        if not infos or not all(info.is_injective() for info in infos):
            return None
        for info in inline_bounded(sch, infos):
            loops = sch.get_loops(info.block_rv)
            if not loops:
                continue
            width = lanes(target, sch.get(info.block_rv).writes[0].source.dtype.bits)
            innermost = get_extent(sch, loops[-1])
            elements = _work(sch, loops)
            if isinstance(innermost, int) and innermost % width == 0:
                # Split before fusing: a vector's lanes then provably share a row.
                *loops, lane = loops[:-1] + sch.split(loops[-1], factors=[None, width])
                sch.vectorize(lane)
            loop = sch.fuse(*loops) if loops else None
            if loop is not None and elements >= PARALLEL_MIN_ELEMENTS:
                sch.parallel(loop)
        return sch


class SerialWhenSmall(CPUScheduleRule):
    """`rule`'s schedule, its parallel loops made serial in a kernel whose largest
    buffer holds fewer than PARALLEL_MIN_ELEMENTS elements (symbolic dims count 1),
    as the rules above decide. dlight.cpu.Reduction parallelizes the rows of every
    softmax: a policy's log_softmax of 20 x 2 values forked TVM's thread pool at
    each call, and its workers, waiting for a core while MXNet's OpenMP threads
    spun on it, made the 20 us call take 3 ms in one call in ten."""

    def __init__(self, rule):
        self.rule = rule

    def is_target_available(self, target):
        return self.rule.is_target_available(target)

    def apply(self, func, target, tunable):
        space = self.rule.apply(func, target, tunable)
        if not isinstance(space, s_tir.Schedule):
            return space
        blocks = space.get_child_blocks(space.get_sblock("root"))
        if max(_elements(region.source) for block in blocks
               for region in (*space.get(block).reads, *space.get(block).writes)) \
                >= PARALLEL_MIN_ELEMENTS:
            return space
        for block in blocks:
            for loop in space.get_loops(block):
                statement = space.get(loop)
                if statement.kind == tirx.ForKind.PARALLEL:
                    space.state.replace(space.get_sref(loop), tirx.For(
                        statement.loop_var, statement.min, statement.extent,
                        tirx.ForKind.SERIAL, statement.body, statement.thread_binding,
                        statement.annotations))
        return space


def _elements(buffer):
    return _bytes(buffer) * 8 // buffer.dtype.bits
