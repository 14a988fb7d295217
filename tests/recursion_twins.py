"""Imperative and hybridize(dynamic=True) twins of the recursive models
(recursive_programs.py), their inputs, and the comparison of a call, or of a
training step's calls (batched with batch_calls=True): outputs, parameter
gradients and the gradients of the input vectors (test_recursion.py,
fuzzing/recursion_streams.py)."""
import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

import gluon_dyn  # noqa: F401  (enables hybridize(dynamic=True))
import recursive_programs as programs


def pair(cls, **options):
    """An imperative block and a dynamic one with the same parameters."""
    blocks = []
    for dynamic in (False, True):
        mx.random.seed(0)
        block = cls()
        block.initialize(mx.init.Uniform(0.5))
        if dynamic:
            block.hybridize(dynamic=True, **options)
        blocks.append(block)
    return blocks


def input_vectors(value):
    """The arrays of real numbers in the arguments (the leaves' vectors, a
    sentence's rows), whose gradients are compared: not words' indices."""
    if isinstance(value, (list, tuple)):
        return [vector for item in value for vector in input_vectors(item)]
    if isinstance(value, programs.Tree):
        return ([value.vector] if value.vector is not None else []) + \
            input_vectors(value.children)
    if isinstance(value, mx.nd.NDArray) and value.ndim > 1:
        return [value]
    return []


def run(block, args, train):
    """Output, parameter gradients and the gradients of the input vectors of one call."""
    vectors = input_vectors(args)
    for vector in vectors:
        vector.attach_grad()
    if not train:
        return block(*args).asnumpy(), {}, []
    with autograd.record():
        out = block(*args)
    out.backward()
    params = {name[len(block.prefix):]: p.grad().asnumpy().copy()
              for name, p in block.collect_params().items()}
    return out.asnumpy(), params, [v.grad.asnumpy().copy() for v in vectors]


def assert_same(imperative, dynamic, args, train):
    assert_same_results(run(imperative, args, train), run(dynamic, args, train))


def assert_same_results(expected, got):
    """(outputs: an array or a list of them, parameter gradients by name, input
    vector gradients) of two runs agree (1e-5)."""
    if isinstance(expected[0], list):
        assert len(got[0]) == len(expected[0])
        outputs = list(zip(expected[0], got[0]))
    else:
        outputs = [(expected[0], got[0])]
    for want, have in outputs:
        np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-5)
    for name in expected[1]:
        np.testing.assert_allclose(got[1][name], expected[1][name], rtol=1e-5, atol=1e-5,
                                   err_msg=name)
    for want, have in zip(expected[2], got[2]):
        np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-5)


class Total(gluon.HybridBlock):
    """A loss-like HybridBlock: the sum of an output (it joins a batch of calls)."""

    def hybrid_forward(self, F, x):   # pylint: disable=arguments-differ
        return F.sum(x)


def run_batch(block, argument_sets, targets=None):
    """Outputs, parameter gradients and input vector gradients of one training step
    calling `block` once per argument set, a Total applied to each output, or with
    `targets` (an array per call) Gluon's SigmoidBinaryCrossEntropyLoss, whose
    gradients stay within 1 as a Total's do (rowwise_losses.py merges its calls)."""
    vectors = [vector for args in argument_sets for vector in input_vectors(args)]
    for vector in vectors:
        vector.attach_grad()
    total, bce = Total(), gluon.loss.SigmoidBinaryCrossEntropyLoss()
    with autograd.record():
        outs = [block(*args) for args in argument_sets]
        if targets is None:
            loss = mx.nd.add_n(*[total(out) for out in outs])
        else:
            values = [bce(out, target) for out, target in zip(outs, targets)]
            loss = mx.nd.add_n(*[value.sum() for value in values])
    loss.backward()
    params = {name[len(block.prefix):]: p.grad().asnumpy().copy()
              for name, p in block.collect_params().items()}
    return [out.asnumpy() for out in outs], params, [v.grad.asnumpy().copy() for v in vectors]


def assert_same_batch(imperative, dynamic, argument_sets, stock_loss=False):
    """`stock_loss`: the step's loss is Gluon's SigmoidBCE against targets of the
    outputs' shapes (taken from the imperative block), else a Total."""
    targets = None
    if stock_loss:
        with autograd.pause():
            targets = [mx.nd.array(np.full(imperative(*args).shape, 0.5))
                       for args in argument_sets]
    assert_same_results(run_batch(imperative, argument_sets, targets),
                        run_batch(dynamic, argument_sets, targets))


def trees(seed, count, leaves=(2, 12), arity=2, vectors=False):
    rng = np.random.RandomState(seed)
    return [programs.random_tree(rng, rng.randint(*leaves), arity, vectors) for _ in range(count)]


def sentence_pairs(seed, count, words=(2, 12), length_known=False):
    """(sentence, parse) pairs: new sentences of new lengths, new parses; with
    `length_known`, the odd positions counted from the sentence's end."""
    rng = np.random.RandomState(seed)
    found = []
    for _ in range(count):
        length = int(rng.randint(*words))
        found.append((programs.sentence(rng, length),
                      programs.constituency(rng, length, length=length if length_known
                                            else None)))
    return found
