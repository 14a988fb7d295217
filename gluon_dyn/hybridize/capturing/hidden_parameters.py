"""Parameters a traced forward reads that the model's `collect_params()`, taken
before the trace, does not name.

- A child built on first use, in the forward: GluonCV's Faster R-CNN builds its
  training target generator at the first `target_generator` access
  (`self._target_generator = self._target_generator()`), in the first training
  call, which is a trace when inference calls came first. Gluon registers it then,
  after the trace collected the model's parameters.
- A block kept in a set, list, tuple or dict attribute: Gluon does not register it,
  so its parameters are never among the model's.

A traced forward reads their parameters (the generator's encoder reads constants,
`params.get_constant('means', ...)`) as graph inputs named after them.
"""
from mxnet import gluon

from .python_state import block_tree


def hidden_parameters(block):
    """{name: Parameter} of `block`'s tree as it is now (a child a traced call made,
    GluonCV's lazily built target generator, is not among the parameters collected
    before the trace) and of the blocks held in containers on it, with their
    descendants."""
    found, seen, pending = {}, set(), list(block_tree(block))
    while pending:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        found.update((p.name, p) for p in node.params.values())
        for value in vars(node).values():
            pending.extend(_blocks_in(value))
    return found


def _blocks_in(value):
    """The blocks directly inside a set, list, tuple or dict (not the value itself: a
    block assigned as an attribute is a registered child)."""
    if isinstance(value, dict):
        value = list(value.values())
    if not isinstance(value, (set, frozenset, list, tuple)):
        return []
    return [item for item in value if isinstance(item, gluon.Block)]
