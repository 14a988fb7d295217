"""Inlining elementwise blocks into their readers without blowing up expressions.

dlight's `try_inline` inlines every block it can. TIR expressions are trees: a block
read k times by its reader is copied k times, so chained reads multiply. TVM's fast
tanh reads its input 19 times and fast exp 40 times; an LSTM cell whose tanh is fed
by the cell's sums, then tanh(tanh(...)) from an unrolled refinement loop, became an
expression of millions of nodes: minutes and gigabytes inside `compute_inline`, then
in lowering. Here a block is kept in its own buffer when its readers would copy more
than DUPLICATED_NODES nodes of it; everything else is inlined as dlight does.
"""
from tvm.ir import expr as ir_expr
from tvm.s_tir import ScheduleError

# The most expression nodes that inlining a block may copy into one reader (its
# size times the reader's loads of it). An LSTM cell's tanh of its gate sums copies
# ~700 nodes 19 times (13k) and stays one kernel; tanh(tanh(tanh(x))) would copy
# ~3k nodes 19 times (57k), so its innermost two tanh stay in a buffer.
DUPLICATED_NODES = 16384

_CHILDREN = ("a", "b", "value", "condition", "true_value", "false_value", "body")


def _walk(expr):
    """`expr` and its sub-expressions (not a load's indices)."""
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ir_expr.TensorLoad):
            continue
        stack.extend(getattr(node, name) for name in _CHILDREN
                     if isinstance(getattr(node, name, None), ir_expr.Expr))
        stack.extend(getattr(node, "args", None) or ())


def _stored_value(block):
    """The value a block stores, or None when its body is not a single store."""
    return getattr(block.body, "value", None)


def _nodes(expr):
    return sum(1 for _ in _walk(expr))


def _loads_of(buffer, expr):
    return sum(1 for node in _walk(expr)
               if isinstance(node, ir_expr.TensorLoad) and node.source.same_as(buffer))


def _copies_too_many_nodes(sch, producer_rv, reader_rv):
    """Whether putting the producer's value in place of the reader's loads of it
    copies more than DUPLICATED_NODES nodes (one load is no copy)."""
    producer, reader = sch.get(producer_rv), sch.get(reader_rv)
    value, read = _stored_value(producer), _stored_value(reader)
    if value is None or read is None or len(producer.writes) != 1:
        return False
    copies = _loads_of(producer.writes[0].source, read)
    return copies > 1 and copies * _nodes(value) > DUPLICATED_NODES


def inline_bounded(sch, blocks):
    """dlight's try_inline (inline what can be, into readers or epilogues into their
    producer; return the blocks left) without the inlinings that would copy more
    than DUPLICATED_NODES nodes into one reader. Sizes are read from the schedule
    as it stands: inlining changes who reads whom."""
    def into_readers(rv):
        return not any(_copies_too_many_nodes(sch, rv, reader)
                       for reader in sch.get_consumers(rv))

    def into_producer(rv):
        return not any(_copies_too_many_nodes(sch, producer, rv)
                       for producer in sch.get_producers(rv))

    def first_done(inline, bounded):
        for index, block in enumerate(blocks):
            if not bounded(block.block_rv):
                continue
            try:
                inline(block.block_rv)
            except ScheduleError:
                continue
            return index
        return None

    while True:
        index = first_done(sch.compute_inline, into_readers)
        if index is None:
            index = first_done(sch.reverse_compute_inline, into_producer)
        if index is None:
            return blocks
        blocks.pop(index)


def inline_contiguous_spatial_bounded(sch, blocks):
    """dlight's try_inline_contiguous_spatial with inline_bounded: each run of
    injective blocks inlined among itself, other blocks kept in place."""
    if blocks is None:
        return None
    remaining, run = [], []
    for block in blocks:
        if block.is_injective():
            run.append(block)
            continue
        remaining.extend(inline_bounded(sch, run) if run else [])
        remaining.append(block)
        run = []
    return remaining + (inline_bounded(sch, run) if run else [])
