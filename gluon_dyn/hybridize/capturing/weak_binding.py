"""References from gluon_dyn's objects to the blocks they serve, that do not keep them alive.

A block hybridized with dynamic=True holds its runner (`block.forward`), and the
runner, its graphs and its traces need the block. Were those references strong,
every such block would sit in a reference cycle, freed only when Python's cyclic
collector happens to run, and with it its parameters, its state and whatever its
graphs captured: a loop building networks (a sweep, a test suite) would pile up
the arrays of every dead one. So the runner's side refers to its blocks weakly.
"""
import weakref


class BlockReference:
    """A weak reference to a block, saying clearly when the block is gone."""

    def __init__(self, block):
        self._ref = weakref.ref(block)

    def __call__(self):
        block = self._ref()
        if block is None:
            raise ReferenceError("the block hybridized with dynamic=True no longer exists")
        return block


class WeakMethod:
    """`function` bound to `owner` without holding it: a converted method set on the
    block it belongs to (`block.hybrid_forward = converted`) would be a cycle."""

    def __init__(self, function, owner):
        self.function = function
        self.owner = BlockReference(owner)
        self.__name__ = getattr(function, "__name__", "method")

    def __call__(self, *args, **kwargs):
        return self.function(self.owner(), *args, **kwargs)


def scope_without_cycle(block):
    """Make Gluon's name scope of `block` refer to it weakly. Gluon's Block keeps a
    `_BlockScope` that refers back to the block, so every block is freed only by
    Python's cyclic collector; for a block hybridized with dynamic=True that would
    keep its graphs' memory too until the collector runs. The scope reads the block
    only inside `with block.name_scope():`, while the block is alive."""
    scope = getattr(block, "_scope", None)
    if scope is not None and not isinstance(scope._block, weakref.ProxyType):
        scope._block = weakref.proxy(block)
