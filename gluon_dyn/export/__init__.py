"""`export` for Gluon blocks: MXNet's own files (`path-symbol.json`,
`path-0000.params`), loadable where only MXNet is installed, and the record of
their checksums that the C and Java runtimes check (`path-checksums.json`,
graph_files/checksums.py).

A block hybridized with dynamic=True exports its general graph (dynamic.py), which
MXNet's static executor can plan too (static_plan.py); other HybridBlocks keep
MXNet's export, without gluon_dyn's training-only nodes (graph_files/strip.py). patches.py
installs `with_dynamic_export` on HybridBlock and `block_export` on Block, which
MXNet gives no export.
"""
import functools

from ..hybridize.capturing.capture import ExportError
from ..hybridize.call.runner import BlockRunner
from ..graph_files import checksums
from .dynamic import export_block
from ..graph_files.strip import strip_symbol_file, strip_training_ops


def _is_dynamic(block):
    return isinstance(vars(block).get("forward"), BlockRunner)


def with_dynamic_export(export):
    """HybridBlock.export, taking `max_iterations` for blocks hybridized dynamic=True."""
    @functools.wraps(export)
    def wrapper(self, path, epoch=0, remove_amp_cast=True, *, max_iterations=None):
        if _is_dynamic(self):
            return export_block(self, path, epoch, remove_amp_cast, max_iterations)
        if max_iterations is not None:
            raise TypeError("export(max_iterations=...) bounds the loops of a block hybridized "
                            "with dynamic=True; %s is not" % type(self).__name__)
        result = export(self, path, epoch, remove_amp_cast)
        strip_symbol_file("%s-symbol.json" % path)
        checksums.write(path, epoch)
        return result
    return wrapper


def block_export(self, path, epoch=0, remove_amp_cast=True, *, max_iterations=None):
    """Export a Block hybridized with dynamic=True (see export/dynamic.py); returns the
    names of the inputs the exported graph takes, in order."""
    if not _is_dynamic(self):
        raise ExportError("%s is a plain Block: export needs hybridize(dynamic=True) and one "
                          "call first" % type(self).__name__)
    return export_block(self, path, epoch, remove_amp_cast, max_iterations)


__all__ = ["ExportError", "block_export", "strip_training_ops", "with_dynamic_export"]
