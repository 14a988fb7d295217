"""The dlight CPU schedule of the convolutions conv_as_matmul.py rewrote.

The kernel has two stages, the im2col columns and the product, then whatever
fusion put after the product (bias, activation). Loops, outermost first:

    for (image, tile of output rows/columns)    parallel when big
        gather the tile's columns               (channels x kernel x tile, in cache)
        for block of `rows` filters
            for k in channels x kernel          one broadcast weight per filter,
                rows x vectors FMAs             one vector load per tile vector
            epilogue on the accumulators, written to NCHW

A tile is whole output rows (or part of one row), so every stage computes exactly
the region of the tile and the output goes out in vectors of consecutive (y, x).
The accumulators (rows x vectors) fit the vector registers with room for the
loads, as in schedule_rules.PackedPanelGemm.
"""
from types import SimpleNamespace

from tvm import s_tir, tirx
from tvm.s_tir.dlight.base import get_extent
from tvm.s_tir.dlight.cpu.base import CPUScheduleRule

from .conv_as_matmul import BLOCK, COLUMNS_BLOCK
from .inlining import inline_bounded
from .schedule_rules import PACKED_ROW_BLOCKS, PACKED_SPARE_REGISTERS, _accumulators, lanes

# Multiply-adds from which the tiles run in parallel: LeNet's first convolution at
# batch 1 (288k) took 3.2 us on one thread and 5-9.5 us on two (fork and join).
PARALLEL_MIN_WORK = 1 << 20
# Vectors per tile row: more gains little (the weight broadcasts are amortised
# by then) and needs more registers than fit beside several filter rows.
MAX_TILE_VECTORS = 4


class Tile:
    """`rows` filters by `out_rows` output rows of `out_columns` each, in vectors of
    `width` lanes."""

    def __init__(self, rows, out_rows, out_columns, width):
        self.rows, self.out_rows, self.out_columns, self.width = (rows, out_rows, out_columns,
                                                                  width)

    @property
    def vectors(self):
        return self.out_rows * self.out_columns // self.width

    def __repr__(self):
        return "Tile(rows=%d, out_rows=%d, out_columns=%d, width=%d)" % (
            self.rows, self.out_rows, self.out_columns, self.width)


def _divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def choose_tile(group_filters, out_h, out_w, lanes_, accumulators):
    """The register tile for a convolution's product: the widest vectors that whole
    tiles of output positions allow, the most vectors up to MAX_TILE_VECTORS, the
    first row count of PACKED_ROW_BLOCKS dividing the filters of a group (so no
    tile mixes groups) whose accumulators fit."""
    budget = accumulators - PACKED_SPARE_REGISTERS
    rows = next((n for n in PACKED_ROW_BLOCKS if group_filters % n == 0), 1)
    width = lanes_
    while width > 1:
        tile = _widest_tile(rows, out_h, out_w, width, min(MAX_TILE_VECTORS, budget // rows))
        if tile is not None:
            return tile
        width //= 2
    return Tile(rows, 1, 1, 1)


def _widest_tile(rows, out_h, out_w, width, max_vectors):
    """Whole output rows, else part of one row, of at most max_vectors vectors."""
    whole_rows = [Tile(rows, r, out_w, width) for r in _divisors(out_h)
                  if (r * out_w) % width == 0 and (r * out_w) // width <= max_vectors]
    part_rows = [Tile(rows, 1, c, width) for c in _divisors(out_w)
                 if c % width == 0 and c // width <= max_vectors]
    tiles = whole_rows or part_rows
    return max(tiles, key=lambda tile: tile.vectors) if tiles else None


class ConvolutionTiles(CPUScheduleRule):
    """Kernels holding conv_as_matmul's two blocks, with injective epilogues."""

    def apply(self, func, target, _tunable):
        if not isinstance(func, tirx.PrimFunc) or not self.is_target_available(target):
            return None
        sch = s_tir.Schedule(func)
        try:
            root = sch.get_sblock("root")
        except s_tir.ScheduleError:  # a kernel calling BLAS (external_gemms.py) has no root block
            return None
        blocks = sch.get_child_blocks(root)
        names = [sch.get(block).name_hint for block in blocks]
        if names.count(BLOCK) != 1 or names.count(COLUMNS_BLOCK) != 1:
            return None
        product, columns = blocks[names.index(BLOCK)], blocks[names.index(COLUMNS_BLOCK)]
        others = [block for block in blocks if block not in (product, columns)]
        # Elementwise work before the columns or after the product, inlined into its
        # readers; what stays must be the epilogue writing the outputs.
        epilogues = inline_bounded(sch, [SimpleNamespace(block_rv=block) for block in others])
        order = [sch.get(block).name_hint for block in sch.get_child_blocks(
            sch.get_sblock("root"))]
        if order.index(COLUMNS_BLOCK) != 0 or order.index(BLOCK) != 1:
            return None
        extents = [get_extent(sch, loop) for loop in sch.get_loops(product)[1:]]
        if not all(isinstance(extent, int) for extent in extents):
            return None
        filters, out_h, out_w, group_channels = extents[:4]
        groups = int(sch.get(columns).writes[0].source.shape[1]) // group_channels
        tile = choose_tile(filters // groups, out_h, out_w,
                           lanes(target, sch.get(product).writes[0].source.dtype.bits),
                           _accumulators(target))
        schedule_convolution(sch, product, columns, [e.block_rv for e in epilogues], tile)
        return sch


def schedule_convolution(sch, product, columns, epilogues, tile):
    """Apply `tile` (see the module docstring) to the kernel's blocks in `sch`."""
    n, f, y, x, *reduction = sch.get_loops(product)
    batch = get_extent(sch, n)
    work = batch if isinstance(batch, int) else 2  # multiply-adds; a symbolic batch counts 2
    for loop in (f, y, x, *reduction):
        work *= get_extent(sch, loop)
    y_tile, y_in = sch.split(y, factors=[None, tile.out_rows])
    x_tile, x_in = sch.split(x, factors=[None, tile.out_columns])
    sch.reorder(y_tile, x_tile, y_in, x_in)
    vector, lane = sch.split(sch.fuse(y_in, x_in), factors=[None, tile.width])
    row_tile, row = sch.split(f, factors=[None, tile.rows])
    k = sch.fuse(*reduction)
    sch.reorder(n, y_tile, x_tile, row_tile, k, row, vector, lane)
    outer = sch.fuse(n, y_tile, x_tile)
    sch.unroll(row)
    sch.unroll(vector)
    sch.vectorize(lane)
    # Accumulators in registers, written once per tile (by the epilogue when there is one).
    write_back = sch.cache_write(product, 0, "local")
    sch.reverse_compute_at(write_back, row_tile, preserve_unit_loops=True)
    writers = [write_back]
    for epilogue in epilogues:
        sch.reverse_compute_at(epilogue, row_tile, preserve_unit_loops=True)
        writers.append(epilogue)
    if epilogues:
        try:
            sch.compute_inline(write_back)
            writers.remove(write_back)
        except s_tir.ScheduleError:  # the product is an output too
            pass
    for writer in writers:
        _vectorize_tile(sch, writer, tile.width)
    sch.compute_at(columns, outer)
    _vectorize_row(sch, columns, tile.width)
    tiles = get_extent(sch, outer)
    if work >= PARALLEL_MIN_WORK and (not isinstance(tiles, int) or tiles > 1):
        sch.parallel(outer)
    init = sch.decompose_reduction(product, k)
    sch.vectorize(sch.get_loops(init)[-1])


def _vectorize_tile(sch, block, width):
    """The block's two innermost loops (a tile's rows and columns) as vectors."""
    *_, rows, columns = sch.get_loops(block)
    sch.vectorize(sch.split(sch.fuse(rows, columns), factors=[None, width])[1])


def _vectorize_row(sch, block, width):
    """The block's innermost loop (a row of the tile, read at stride 1 when the
    convolution's is 1) in vectors of the widest power of two up to `width` dividing it."""
    loop = sch.get_loops(block)[-1]
    extent, lanes_ = get_extent(sch, loop), width
    while extent % lanes_:
        lanes_ //= 2
    if lanes_ > 1:
        sch.vectorize(sch.split(loop, factors=[None, lanes_])[1])
