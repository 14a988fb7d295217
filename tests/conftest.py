"""Shared helpers for the control-flow operator tests.

The central helper is `compare_modes`: it builds two copies of a HybridBlock from a
`hybrid_forward`-style function `fn(block, F, *inputs, **params)` with identical
parameter values, runs one imperatively and one hybridized, each forward and
backward under `autograd.record()` on fresh copies of the inputs, and checks that
outputs and gradients (w.r.t. the inputs that get `attach_grad` and w.r.t. every
Gluon parameter) agree. `run_reference` runs a plain-Python function written with
`mx.nd` (an unrolled loop) on the parameters of a block, for comparison with the
imperative run.
"""
import json
import os

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_dyn  # noqa: F401  (loads the C++ library, registers the ops)
from gluon_dyn import machine_load
from gluon_dyn.hybridize.timing import speed_check

RTOL = ATOL = 1e-5


@pytest.fixture(scope="session", autouse=True)
def one_tvm_cache_for_the_run(tmp_path_factory):
    """Libraries TVM compiles for tests that name no cache directory go to one cache
    for the whole run (run_suite.py's, shared by its processes; else this session's),
    never the user's ~/.cache, whose libraries from older runs would hide compiles."""
    os.environ.setdefault("GLUON_DYN_TVM_CACHE", str(tmp_path_factory.mktemp("tvm_cache")))


@pytest.fixture(autouse=True)
def graphs_kept_even_when_slower(monkeypatch):
    """Tests of the graph machinery use tiny programs, which Python may run faster
    than MXNet's graphs: they keep their graphs (test_speed_check.py tests the check)."""
    monkeypatch.setattr(speed_check, "ENABLED_BY_DEFAULT", False)


@pytest.fixture(autouse=True)
def machine_load_held_still(monkeypatch):
    """Other jobs on the machine (the suite's own subprocesses too) would trigger
    re-measurements at random: tests see a constant load unless they set one
    (test_measured_choice.py)."""
    monkeypatch.setattr(machine_load, "other_cpus", lambda: 0.0)


@pytest.fixture(autouse=True)
def engine_is_clean():
    """An operator error left unread would otherwise surface in a later test."""
    yield
    mx.nd.waitall()


def nd(values, dtype="float32"):
    return mx.nd.array(np.asarray(values), dtype=dtype)


def flat_list(value):
    """Flatten an array or a nested list/tuple of arrays into a list."""
    if isinstance(value, (list, tuple)):
        out = []
        for item in value:
            out.extend(flat_list(item))
        return out
    return [value]


def structure(value):
    """The nesting structure of a value: None for an array, a list of structures otherwise."""
    if isinstance(value, (list, tuple)):
        return [structure(v) for v in value]
    return None


class FnBlock(gluon.HybridBlock):
    """A HybridBlock whose `hybrid_forward` is `fn(self, F, *inputs, **params)`.

    `setup(block)` runs inside the block's name scope to create child blocks
    (e.g. `block.dense = gluon.nn.Dense(...)`) and parameters
    (`block.w = block.params.get(...)`, passed to fn as keyword arguments).
    """

    def __init__(self, fn, setup=None, **kwargs):
        super().__init__(**kwargs)
        self._fn = fn
        with self.name_scope():
            if setup is not None:
                setup(self)

    def hybrid_forward(self, F, *inputs, **params):
        return self._fn(self, F, *inputs, **params)


def structural_params(block):
    """Parameters keyed by their structural name (identical across copies of a block)."""
    return block._collect_params_with_prefix()


def make_block(fn, setup=None, seed=0, hybridize=False, init=None):
    mx.random.seed(seed)
    np.random.seed(seed)
    block = FnBlock(fn, setup)
    block.initialize(init if init is not None else mx.init.Uniform(0.5))
    for name, param in structural_params(block).items():
        # Parameters are compared by value right away; deferred initialisation
        # would make the two copies differ.
        assert param._deferred_init == (), "give %s a full shape (e.g. in_units)" % name
    if hybridize:
        block.hybridize()
    return block


def copy_params(src, dst):
    src_params, dst_params = structural_params(src), structural_params(dst)
    assert sorted(src_params) == sorted(dst_params)
    for name, param in src_params.items():
        dst_params[name].set_data(param.data().copy())


def make_pair(fn, setup=None, seed=0):
    """An imperative block and a hybridized block with identical parameter values."""
    imperative = make_block(fn, setup, seed=seed)
    hybrid = make_block(fn, setup, seed=seed + 1, hybridize=True)
    copy_params(imperative, hybrid)
    return imperative, hybrid


def assert_params_equal(actual, expected):
    """Two copies of a block hold the same parameter values (1e-5)."""
    a, e = structural_params(actual), structural_params(expected)
    assert sorted(a) == sorted(e)
    for name in e:
        np.testing.assert_allclose(a[name].data().asnumpy(), e[name].data().asnumpy(),
                                   rtol=RTOL, atol=ATOL, err_msg=name)


def loss_weights(arr, index):
    """Deterministic weights of the shape of output `index`, so the loss sees every element."""
    rng = np.random.RandomState(1000 + index)
    return mx.nd.array(rng.uniform(0.5, 1.5, size=arr.shape), dtype="float32")


def _run(call, block, inputs, grad_inputs, backward):
    """Forward (+ backward of a weighted sum of outputs) of `call(*inputs)` under record()."""
    copies = [mx.nd.array(x.asnumpy(), dtype=x.dtype) for x in inputs]
    for i in grad_inputs:
        copies[i].attach_grad()
    params = structural_params(block) if block is not None else {}
    for param in params.values():
        if param.grad_req != "null":
            param.zero_grad()
    with autograd.record():
        out = call(*copies)
        flat = flat_list(out)
        terms = [(o.astype("float32") * loss_weights(o, i)).sum()
                 for i, o in enumerate(flat) if o.size > 0]
        loss = mx.nd.add_n(*terms) if len(terms) > 1 else (terms[0] if terms else None)
    if backward and loss is not None:
        loss.backward()
    outputs = [o.asnumpy() for o in flat]
    grads = {}
    if backward:
        for i in grad_inputs:
            grads["input%d" % i] = copies[i].grad.asnumpy()
        for name, param in params.items():
            if param.grad_req != "null":
                grads[name] = param.grad().asnumpy()
    return {"structure": structure(out), "outputs": outputs, "grads": grads}


def run_block(block, inputs, grad_inputs=(), backward=True):
    """Outputs and gradients of `block(*inputs)` as numpy, on fresh copies of the inputs."""
    return _run(block, block, inputs, grad_inputs, backward)


def run_reference(ref, block, inputs, grad_inputs=(), backward=True):
    """Same as run_block for `ref(block, *inputs)`, a plain-Python function written with mx.nd."""
    return _run(lambda *xs: ref(block, *xs), block, inputs, grad_inputs, backward)


def assert_same(actual, expected, what=""):
    """Outputs (and their structure and shapes) and gradients agree to 1e-5."""
    assert actual["structure"] == expected["structure"], what
    assert len(actual["outputs"]) == len(expected["outputs"]), what
    for i, (a, e) in enumerate(zip(actual["outputs"], expected["outputs"])):
        assert a.shape == e.shape, "%s output %d: shape %s vs %s" % (what, i, a.shape, e.shape)
        np.testing.assert_allclose(a, e, rtol=RTOL, atol=ATOL, err_msg="%s output %d" % (what, i))
    assert sorted(actual["grads"]) == sorted(expected["grads"]), what
    for name in expected["grads"]:
        np.testing.assert_allclose(actual["grads"][name], expected["grads"][name], rtol=RTOL,
                                   atol=ATOL, err_msg="%s gradient of %s" % (what, name))


def assert_nonzero_grads(result, names=None):
    """Guards against comparisons that pass because every gradient is zero."""
    for name in names if names is not None else result["grads"]:
        assert np.abs(result["grads"][name]).sum() > 0, "gradient of %s is all zero" % name


def graph_ops(graph):
    """Every op name in a graph (a JSON dict), nested subgraphs included."""
    ops = set()
    for node in graph["nodes"]:
        ops.add(node["op"])
        for sub in node.get("subgraphs", []):
            ops |= graph_ops(sub)
    return ops


def cached_graph_ops(block):
    """Op names of a hybridized block's cached graph (it must have been called)."""
    assert block._cached_graph, "the block was not run as a graph"
    return graph_ops(json.loads(block._cached_graph[1].tojson()))


def compare_modes(fn, inputs_list, grad_inputs=(), setup=None, reference=None, backward=True,
                  seed=0, expect_ops=()):
    """Run `fn` imperatively and hybridized on each inputs tuple of `inputs_list`.

    The same two blocks are reused for every inputs tuple, so a hybridized block
    is called repeatedly with e.g. different sequence lengths or trip counts.
    Asserts equality of outputs and gradients between the modes and, when
    `reference(block, *inputs)` is given, between the imperative run and it.
    `expect_ops` names ops the hybridized graph must contain (e.g. "_foreach").
    Returns the list of imperative results.
    """
    imperative, hybrid = make_pair(fn, setup, seed=seed)
    results = []
    for k, inputs in enumerate(inputs_list):
        imp = run_block(imperative, inputs, grad_inputs, backward)
        hyb = run_block(hybrid, inputs, grad_inputs, backward)
        assert_same(hyb, imp, "hybridized vs imperative, call %d:" % k)
        if reference is not None:
            ref = run_reference(reference, imperative, inputs, grad_inputs, backward)
            assert_same(imp, ref, "imperative vs reference, call %d:" % k)
        results.append(imp)
    assert set(expect_ops) <= cached_graph_ops(hybrid), "graph lacks %s" % (expect_ops,)
    return results


def forward_only(block, inputs):
    """Outputs of `block(*inputs)` as numpy, without recording."""
    with autograd.pause():
        out = block(*inputs)
    return [o.asnumpy() for o in flat_list(out)], structure(out)


def dense_setup(units=3, in_units=3, name="dense"):
    def setup(block):
        setattr(block, name, gluon.nn.Dense(units, in_units=in_units, flatten=False))
    return setup
