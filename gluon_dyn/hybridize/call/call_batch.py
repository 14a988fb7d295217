"""The block that runs a batch of calls (call_batching.py): its forward makes them in
order, an argument naming an earlier call's result by its index; it is kept per set of
callees (`callee_key`) and holds them only while a batch runs."""
import mxnet as mx
from mxnet import gluon

from ..capturing import python_state


class Callees:
    """What CallBatch.forward reads of its block, for a batch made as written."""

    def __init__(self, callees):
        self.callees = callees


class CallBatch(gluon.Block):
    """The block whose forward makes a batch's calls in order; its callees are
    registered as its children only while a batch runs (held for good, the block
    batching calls, which holds this one, would be in a reference cycle). Its
    graphs are keyed by its callees, each by `child_key` and its own walk
    (python_state.python_state)."""

    @staticmethod
    def child_key(callee):
        return callee_key(callee)

    def __init__(self):
        super().__init__(prefix="call_batch_")
        self.callees = []

    def holding(self, callees):
        return _Holding(self, callees)

    def forward(self, calls):
        outputs = []
        for callee, args, earlier in calls:
            # earlier[k]: whether args[k] is the index of an earlier call's result.
            args = [outputs[arg] if earlier[position] else arg
                    for position, arg in enumerate(args)]
            outputs.extend(flattened(self.callees[callee](*args)))
        return outputs


class _Holding:
    """Registers a batch's callees (alike at every batch: CallBatches are kept per
    callee_key) past Block.__setattr__, which would count it a change and make
    every block tree be walked again; and forgets the walk of the CallBatch's
    tree, which holds the callees."""

    def __init__(self, call_batch, callees):
        self.call_batch, self.callees = call_batch, callees

    def __enter__(self):
        vars(self.call_batch)["callees"] = list(self.callees)
        for number, callee in enumerate(self.callees):
            self.call_batch._children["callee%d" % number] = callee

    def __exit__(self, *exc):
        self.call_batch._children.clear()
        vars(self.call_batch)["callees"] = []
        python_state.forget(self.call_batch)


_ARRAY = ("array",)     # in a repeat form: an array argument's place


def repeat_form(args):
    """(The form of a CallBatch's call on `args`, `(calls,)`: each call's callee, the
    earlier results it takes and its Python values (a merged loss's rows: a tuple),
    an array argument as its place; those arrays, in order), for RepeatedCall; None
    where an argument is another value (a list, an object)."""
    (calls,) = args
    form, arrays = [], []
    for callee, call_args, earlier in calls:
        parts = [callee]
        for arg, taken in zip(call_args, earlier):
            if taken:
                parts.append(("result", arg))
            elif isinstance(arg, mx.nd.NDArray):
                parts.append(_ARRAY)
                arrays.append(arg)
            elif _plain(arg):
                parts.append(_typed(arg))
            else:
                return None
        form.append(tuple(parts))
    return tuple(form), tuple(arrays)


def _typed(value):
    """A plain value with its type, and its items' (1, 1.0 and True key apart)."""
    if isinstance(value, tuple):
        return tuple, tuple(map(_typed, value))
    return type(value), value


def flattened(value):
    """The arrays of `value` (an array, or lists and tuples of them), in order."""
    if isinstance(value, (list, tuple)):
        return [array for item in value for array in flattened(item)]
    return [value]


_GLUON_ATTRIBUTES = frozenset(vars(gluon.HybridBlock(prefix="gluon_dyn_probe_")))
_PLAIN = (bool, int, float, str, type(None))


def callee_key(block):
    """What a CallBatch is kept by, per callee: the block; or, for a HybridBlock
    without parameters or children whose own attributes are plain values (a Gluon
    loss made anew at each step), its type and those values: its compiled bodies
    serve every such block alike."""
    if isinstance(block, gluon.HybridBlock) and not block._children and \
            not block._reg_params and not list(block.params.keys()):
        own = sorted((name, value) for name, value in vars(block).items()
                     if name not in _GLUON_ATTRIBUTES)
        if all(_plain(value) for _, value in own):
            return (type(block), tuple(own))
    return id(block)


def _plain(value):
    if isinstance(value, tuple):
        return all(_plain(item) for item in value)
    return isinstance(value, _PLAIN)
