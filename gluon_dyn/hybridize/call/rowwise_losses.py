"""A batch's calls of one Gluon loss, made one call on their rows (call_batching.py).

A step written per example applies the loss once per call: 25 trees, 25 losses of
a (1, 2) row each, every one a few operators of the batch's graph and of its
backward (in a TreeRNN step, 200 of about 530). The stock Gluon losses of
ROWWISE_LOSSES compute each row of their result from the same rows of their two
arguments (batch_axis 0, elementwise or along a later axis), so the calls of one
such loss whose arguments' rows are known run as one call on the rows
concatenated, its result split back per call. Equivalent to::

    def rowwise(loss, calls):       # calls: [(pred, label), ...], rows first
        rows = [pred.shape[0] for pred, _ in calls]
        result = loss(concat(*[p for p, _ in calls], dim=0),
                      concat(*[l for _, l in calls], dim=0))
        return split(result, rows)  # call k's result: its rows of `result`

The merged call runs where the last of its calls was made; a call taking one of
their results ends the group before it. Losses hold no state and draw no random
numbers, so only their order among themselves is kept. A result's rows come from
the type its call was deferred with (its graph's, or the recursion engine's
body's); `Merge.check` compares them with the arrays the batch computed before any
result is handed out, and a difference fails the batch, which then runs as
written.
"""
import collections

from mxnet import gluon

from .call_batch import callee_key

# Not here: sample weights and SigmoidBCE's pos_weight (they broadcast against the
# loss's unreduced shape, not by rows), KLDivLoss (its label broadcasts against
# pred), and losses reducing over the batch (PoissonNLL, SDML, CTC, Triplet).
ROWWISE_LOSSES = (gluon.loss.SoftmaxCrossEntropyLoss, gluon.loss.L2Loss, gluon.loss.L1Loss,
                  gluon.loss.SigmoidBinaryCrossEntropyLoss, gluon.loss.HuberLoss,
                  gluon.loss.HingeLoss, gluon.loss.SquaredHingeLoss, gluon.loss.LogisticLoss)
MERGED_KEPT = 16     # merged losses kept per batcher: one per loss


class RowwiseLoss(gluon.HybridBlock):
    """`loss` applied to the rows of several calls' (pred, label) at once: takes
    pred and label of each call in turn, then the calls' rows (a tuple: a Python
    value of the call, which its graphs are traced for), returns each call's
    result. One block per loss, whatever the calls: a CallBatch is kept per set of
    callees, and a step whose calls vary (trees per call, calls per step) keeps
    one CallBatch."""

    def __init__(self, loss):
        super().__init__(prefix="rowwise_")
        self.loss = loss

    def hybrid_forward(self, F, *arrays):   # pylint: disable=arguments-differ
        arrays, rows = arrays[:-1], arrays[-1]
        result = self.loss(F.concat(*arrays[0::2], dim=0), F.concat(*arrays[1::2], dim=0))
        if len(set(rows)) == 1:
            return list(F.split(result, num_outputs=len(rows), axis=0))
        ends = [sum(rows[:k + 1]) for k in range(len(rows))]
        return [F.slice_axis(result, axis=0, begin=end - count, end=end)
                for count, end in zip(rows, ends)]


def _rows(block, types):
    """The rows of a call of `block` on arrays of `types` ((shape, dtype) each, or
    None where unknown) when it may join a merged call, else None."""
    if type(block) not in ROWWISE_LOSSES or len(types) != 2 or None in types or \
            block._batch_axis != 0:   # pylint: disable=protected-access
        return None
    (pred, _), (label, _) = types
    if not pred or not label or pred[0] != label[0] or pred[0] < 1:
        return None
    axis = getattr(block, "_axis", None)
    if axis is not None and axis % len(pred) == 0:
        return None     # softmax over the rows' axis
    return pred[0]


class Merge:
    """A batch's calls with its mergeable loss calls made one each: `callees` and
    `calls` as call_batching.Batch keeps them, `order[k]`: the batch's result that
    output k is, `checks`: (output, expected shape) of the merged calls' arguments
    that are results, `merged`: how many of the batch's calls the merged calls make."""

    def __init__(self, callees, calls, order, checks, merged):
        self.callees, self.calls, self.order, self.checks = callees, calls, order, checks
        self.merged = merged

    def check(self, outputs):
        """The batch's results from the outputs of the merged calls; raises when an
        argument's rows differ from those the merge assumed."""
        for position, shape in self.checks:
            if outputs[position].shape != shape:
                raise ValueError("a loss call merged by rows took an array of shape %s, "
                                 "not the %s its call was deferred with"
                                 % (outputs[position].shape, shape))
        results = [None] * len(outputs)
        for position, result in enumerate(self.order):
            results[result] = outputs[position]
        return results


class Merger:
    """The merged losses of one batcher, kept by loss (callee_key): a CallBatch's
    graphs are keyed by its callees, so a step's merged loss is the same block at
    every step."""

    def __init__(self):
        self._kept = collections.OrderedDict()

    def merge(self, callees, calls, counts, types):
        """The Merge of a batch (`counts[k]`: results of call k, `types[r]`: the
        expected (shape, dtype) of result r, or None), or None when no two calls
        merge."""
        if len(set(call[0] for call in calls)) == len(calls):
            return None         # no block called twice (a model and its loss)
        firsts = [sum(counts[:k]) for k in range(len(counts))]
        producer = {first + n: k for k, first in enumerate(firsts) for n in range(counts[k])}
        entries, open_groups, rows_of, merging = [], {}, {}, False
        for index, (callee, args, earlier) in enumerate(calls):
            read = {producer[arg] for arg, ours in zip(args, earlier) if ours}
            for key, group in list(open_groups.items()):
                if read.intersection(group):
                    entries.append(open_groups.pop(key))
            arg_types = [types[arg] if ours else
                         (getattr(arg, "shape", None), getattr(arg, "dtype", None))
                         for arg, ours in zip(args, earlier)]
            rows_of[index] = _rows(callees[callee], arg_types)
            if rows_of[index] is None:
                entries.append([index])
                continue
            key = (callee, tuple((shape[1:], dtype) for shape, dtype in arg_types))
            group = open_groups.setdefault(key, [])
            group.append(index)
            merging = merging or len(group) > 1
        if not merging:
            return None
        entries.extend(open_groups.values())
        return self._merged(callees, calls, counts, firsts, types, entries, rows_of)

    def _merged(self, callees, calls, counts, firsts, types, entries, rows_of):
        new_callees, new_calls, order, checks = list(callees), [], [], []
        position_of = {}     # the batch's result -> its output position
        for entry in entries:
            args, earlier = [], []
            for index in entry:
                _, call_args, call_earlier = calls[index]
                for arg, ours in zip(call_args, call_earlier):
                    if ours and len(entry) > 1:
                        checks.append((position_of[arg], types[arg][0]))
                    args.append(position_of[arg] if ours else arg)
                    earlier.append(ours)
            if len(entry) == 1:
                callee, results = calls[entry[0]][0], range(firsts[entry[0]],
                                                             firsts[entry[0]] + counts[entry[0]])
            else:
                block = self._block(callees[calls[entry[0]][0]])
                if block not in new_callees:
                    new_callees.append(block)
                args.append(tuple(rows_of[index] for index in entry))
                earlier.append(0)
                callee, results = new_callees.index(block), [firsts[index] for index in entry]
            new_calls.append([callee, args, earlier])
            for result in results:
                position_of[result] = len(order)
                order.append(result)
        return Merge(new_callees, new_calls, order, checks,
                     sum(len(entry) for entry in entries if len(entry) > 1))

    def _block(self, loss):
        key = callee_key(loss)
        block = self._kept.get(key)
        if block is None:
            block = self._kept[key] = RowwiseLoss(loss)
            while len(self._kept) > MERGED_KEPT:
                self._kept.popitem(last=False)
        self._kept.move_to_end(key)
        return block
