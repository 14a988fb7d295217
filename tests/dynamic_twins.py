"""Two copies of a block, one run as written and one through hybridize(dynamic=True).

`twins` makes the copies with the same parameter values; `assert_same` compares
whatever two runs returned (nested lists, tuples and dicts of arrays and Python
values), and `calls_on_graphs` says how many calls of a dynamic block graphs served.
`python_state` and `gradients` give what a run leaves on the blocks, to compare;
`graph_figures` sums up report() over a forward split at graph breaks and the
methods hybridized with `methods=`.
"""
import random

import mxnet as mx
import numpy as np

import gluon_dyn

ATOL = 1e-5


def twins(make, example=None, seed=0, init=None, initialized=False, **options):
    """(imperative, dynamic): blocks made by `make()`, initialized alike (`init`,
    Uniform(0.5) by default; `initialized`: `make` initializes them, as d2l's models
    and GluonCV's pretrained=False ones do, under the same seeds); `example`: a tuple
    of arguments of a first call that finishes Gluon's deferred initialization of
    both; `options`: of the dynamic block's hybridize."""
    blocks = [seeded_block(make, example, seed, init, initialized) for _ in range(2)]
    copy_parameters(blocks[0], blocks[1])
    blocks[1].hybridize(dynamic=True, **options)
    return blocks


def seeded_block(make, example=None, seed=0, init=None, initialized=False):
    """One block as `twins` makes each of its two: alone, where a second copy would
    be in the way (a process's memory)."""
    if initialized:   # every generator a package's constructor may draw from
        random.seed(seed)
        np.random.seed(seed)
        mx.random.seed(seed)
        block = make()
    else:
        block = make()
        mx.random.seed(seed)
        block.initialize(init if init is not None else mx.init.Uniform(0.5))
    if example is not None:
        block(*example)
    return block


def copy_parameters(source, target):
    """Give `target` the parameter values of `source`, a block of the same structure,
    by structural names: Gluon's prefixes count instances (dense9_ and dense10_ sort
    in another order in a second copy)."""
    values = source._collect_params_with_prefix()  # pylint: disable=protected-access
    for name, param in target._collect_params_with_prefix().items():
        param.set_data(values[name].data())


def assert_same(got, expected, what="value", atol=ATOL, scaled=False):
    """`got` and `expected` hold equal values in the same structure. `scaled`: the
    tolerance of an array grows with its largest magnitude (gradients summed over
    a whole batch, which a graph may sum in another order)."""
    if isinstance(expected, mx.nd.NDArray):
        assert isinstance(got, mx.nd.NDArray), "%s: %r, expected an array" % (what, got)
        assert got.shape == expected.shape, "%s: shape %s, expected %s" % (
            what, got.shape, expected.shape)
        wanted = expected.asnumpy()
        scale = max(1.0, float(np.abs(wanted).max())) if scaled and wanted.size else 1.0
        np.testing.assert_allclose(got.asnumpy(), wanted, rtol=atol, atol=atol * scale,
                                   err_msg=what)
    elif isinstance(expected, (list, tuple)):
        assert type(got) is type(expected) and len(got) == len(expected), \
            "%s: %r, expected %r" % (what, got, expected)
        for index, (g, e) in enumerate(zip(got, expected)):
            assert_same(g, e, "%s[%d]" % (what, index), atol, scaled)
    elif isinstance(expected, dict):
        assert isinstance(got, dict) and sorted(got, key=repr) == sorted(expected, key=repr), \
            "%s: keys %r, expected %r" % (what, list(got), list(expected))
        for key in expected:
            assert_same(got[key], expected[key], "%s[%r]" % (what, key), atol, scaled)
    else:
        assert got == expected, "%s: %r, expected %r" % (what, got, expected)


def calls_on_graphs(block):
    """How many calls of a dynamic block graphs (or graph segments) served."""
    return gluon_dyn.hybridize.report(block)["calls"]["graph"]


def python_state(block):
    """What a run leaves on the block and its descendants besides parameters:
    {"path.attribute": value} for attributes holding arrays, lists or tuples of
    them (d2l's `attention_weights`, scratch weights) or numbers."""
    state = {}
    for path, node in _named_blocks(block, type(block).__name__):
        for name, value in vars(node).items():
            if not name.startswith("_") and name != "forward" and _is_state(value):
                state["%s.%s" % (path, name)] = value
    return state


def _named_blocks(block, path):
    yield path, block
    for name, child in block._children.items():  # pylint: disable=protected-access
        yield from _named_blocks(child, "%s.%s" % (path, name))


def _is_state(value):
    if isinstance(value, (list, tuple)):
        return bool(value) and all(item is None or _is_state(item) for item in value) and \
            any(item is not None for item in value)
    return isinstance(value, (mx.nd.NDArray, int, float)) and not isinstance(value, bool)


def gradients(block):
    """{name: gradient} of the block's parameters that take one, and of the arrays
    with gradients attached that it keeps as attributes (d2l's scratch models)."""
    grads = {name: param.grad() for name, param in
             sorted(block._collect_params_with_prefix().items())  # pylint: disable=protected-access
             if param.grad_req != "null"}
    for path, value in python_state(block).items():
        if isinstance(value, mx.nd.NDArray) and value.grad is not None:
            grads[path] = value.grad
    return grads


def parameter_values(block):
    """{name: value} of every parameter of the block."""
    return {name: param.data() for name, param in
            sorted(block._collect_params_with_prefix().items())}  # pylint: disable=protected-access


def graph_figures(made):
    """Figures of a report() (`made`), the graph segments of a forward split at graph
    breaks and the methods hybridized with `methods=` included: {"graphs": graphs
    and compiled recursive bodies kept,
    "graph_breaks": [{"at", "why"}], "fallbacks": [why the block or a segment runs as
    Python], "internal_errors": [...]}."""
    recursion = made.get("recursion") or {}
    figures = {"graphs": made["cached_graphs"] + len(recursion.get("bodies", [])),
               "graph_breaks": [], "fallbacks": [], "internal_errors":
               list(made["internal_errors"])}
    children = list(made.get("child_runners", {}).values())
    if made["fallback"] and any(child["calls"]["graph"] for child in children):
        # Run as Python around child blocks on graphs of their own: a graph break.
        figures["graph_breaks"].append({"at": "its child blocks", "why": made["fallback"]})
    elif made["fallback"]:
        figures["fallbacks"].append(made["fallback"])
    if recursion.get("state", "serving") != "serving":
        figures["fallbacks"].append("recursion engine: " + recursion["state"])
    segments = made.get("graph_segments")
    parts = list(made.get("methods", {}).values()) + children
    if segments:
        figures["graph_breaks"].extend(segments["graph_breaks"])
        parts += segments["segments"]
    for part in parts:
        for key, value in graph_figures(part).items():
            figures[key] += value
    return figures
