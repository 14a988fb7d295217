"""The graph passes, as one ordered sequence (as TVM Relax composes module passes).

Every graph MXNet runs for a capture goes through PIPELINE, in order. Each pass
takes a graph and the Run it is made for, and gives the graph it leaves (the same
graph where it changes nothing):

1. fused_cells: loops over Gluon's recurrent cells as MXNet's RNN operator (graphs
   traced for exact shapes, where the Run asks for it: recorded runs, and the
   second form of an inference graph that graph_choice.py measures);
2. row_projections: the per-row projections of an array made one (exact shapes);
3. equivalent_ops: operators MXNet runs faster under other names;
4. stacked_weight_gradients: repeated products made one with their weight gradients
   (recorded runs, exact shapes);
5. gradient_sums: reads bounded for MXNet's planned backward (recorded runs), and the
   CachedOp flags that plan allows.

Equivalent to::

    def apply(symbol, run):
        for _, graph_pass in PIPELINE:
            symbol = graph_pass(symbol, run)
        return symbol
"""
import dataclasses
from typing import Optional

from . import (equivalent_ops, fused_cells, gradient_sums, row_projections,
               stacked_weight_gradients)


@dataclasses.dataclass
class Run:
    """What the passes know of the runs a graph is made for, and what they leave.

    recording:   for recorded runs (forward and backward), else for inference;
    training:    autograd's training mode of the runs (the graph's cache key holds it);
    dtypes:      the graph inputs' dtypes by name;
    shapes:      the graph inputs' shapes by name when traced for exact shapes, else None;
    cells:       the cells the RNN operator may run (fused_cells.cells_of);
    fuse_cells:  whether to fuse them;
    flags:       the CachedOp flags of its memory plan (gradient_sums may drop them).
    Left by the passes: the prefixes of the cells fused, the StackedGradients (and the
    graph it was made from, whose inputs it takes).
    """
    recording: bool
    training: bool
    dtypes: dict
    shapes: Optional[dict]
    cells: dict
    fuse_cells: bool
    flags: list
    fused_prefixes: list = dataclasses.field(default_factory=list)
    stacked: object = None
    before_stacking: object = None


def _fused_cells(symbol, run):
    if run.shapes is None or not run.fuse_cells:
        return symbol
    symbol, run.fused_prefixes = fused_cells.fused(symbol, run.cells)
    return symbol


def _row_projections(symbol, run):
    return symbol if run.shapes is None else row_projections.batched(symbol, run.shapes)


def _equivalent_ops(symbol, run):
    # Dropout drops in recorded training runs: gluon_dyn's draws MXNet's numbers.
    return equivalent_ops.rewritten(symbol, run.dtypes, run.shapes,
                                    dropping=run.recording and run.training)


def _stacked_weight_gradients(symbol, run):
    if not run.recording or run.shapes is None:
        return symbol
    run.before_stacking = symbol
    run.stacked = stacked_weight_gradients.stacked(symbol, run.shapes)
    return run.stacked.symbol if run.stacked else symbol


def _gradient_sums(symbol, run):
    if not run.recording:
        return symbol
    symbol, run.flags = gradient_sums.planned_recording(symbol, run.flags)
    return symbol


PIPELINE = (("fused_cells", _fused_cells), ("row_projections", _row_projections),
            ("equivalent_ops", _equivalent_ops),
            ("stacked_weight_gradients", _stacked_weight_gradients),
            ("gradient_sums", _gradient_sums))


def apply(symbol, run):
    """`symbol` through every pass of PIPELINE, in order, for `run` (a Run)."""
    for _, graph_pass in PIPELINE:
        symbol = graph_pass(symbol, run)
    return symbol
