"""The table from MXNet op names to converter functions.

A converter is ``fn(ctx, node, args)``: ``args`` are the Relax values of the
node's inputs, in order; it returns one Relax expression, or a list of them
for the node's first outputs; outputs left out or ``None`` are not produced
(e.g. BatchNorm's batch statistics at inference). It raises ``Unsupported`` when it cannot
convert the node with these attributes or input types.
"""


class Unsupported(Exception):
    """A node cannot be converted; the message says why."""


_CONVERTERS = {}


def register(*op_names):
    """Decorator registering a converter for MXNet ops named ``op_names``."""
    def decorate(fn):
        for name in op_names:
            if name in _CONVERTERS:
                raise ValueError("two converters registered for MXNet op %r" % name)
            _CONVERTERS[name] = fn
        return fn
    return decorate


def lookup(op_name):
    """The converter of an MXNet op, or None."""
    return _CONVERTERS.get(op_name)


def converted_ops():
    """MXNet op names with a converter (those of _while_loop, _cond and
    gluon_dyn_assert always decline, giving the reason)."""
    return sorted(_CONVERTERS)
