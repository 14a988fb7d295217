"""Helpers for the tvm_bridge tests: compile a Relax module, run it, compare with MXNet.

Whole modules compile with plain ``tvm.compile`` + ``relax.VirtualMachine``;
partitioned graphs run through the bridge's executor, ``SegmentedGraph``.
"""
import os
import tempfile

os.environ.setdefault("TVM_NUM_THREADS", "2")  # else TVM pins this thread (and MXNet's) to CPU 0

import mxnet as mx  # noqa: E402
import numpy as np  # noqa: E402
import tvm  # noqa: E402
from tvm import relax  # noqa: E402

from tvm_bridge import (SegmentedGraph, build_graph_module, load_graph,  # noqa: E402
                        partition)

# Libraries compiled by the tests' plans, removed when the test process ends.
COMPILE_CACHE = tempfile.TemporaryDirectory(prefix="tvm_bridge_tests_")

RTOL = ATOL = 1e-5
TARGET = {"kind": "llvm"}


def compile_module(mod):
    """A Relax VM for the module."""
    return relax.VirtualMachine(tvm.compile(mod, target=tvm.target.Target(TARGET)), tvm.cpu())


def run_main(vm, arrays):
    """Calls ``main`` on numpy arrays; returns its tuple of outputs as numpy arrays."""
    result = vm["main"](*[tvm.runtime.tensor(np.ascontiguousarray(a)) for a in arrays])
    return [out.numpy() for out in result]


def run_mxnet(symbol, inputs):
    """Outputs of a symbol at inference (is_train=False), inputs given by name."""
    args = {name: mx.nd.array(inputs[name], dtype=inputs[name].dtype)
            for name in symbol.list_arguments()}
    aux = {name: mx.nd.array(inputs[name], dtype=inputs[name].dtype)
           for name in symbol.list_auxiliary_states()}
    executor = symbol.bind(mx.cpu(), args=args, aux_states=aux, grad_req="null")
    return [out.asnumpy() for out in executor.forward(is_train=False)]


def uniform(shape, dtype="float32", low=-1.0, high=1.0, seed=0):
    return np.random.RandomState(seed).uniform(low, high, size=shape).astype(dtype)


def concrete(shape, symbolic_axes, size):
    """``shape`` with its symbolic axes set to ``size``."""
    return tuple(size if axis in symbolic_axes else dim for axis, dim in enumerate(shape))


def make_inputs(symbol, shapes, dtypes=None, special=None, seed=0):
    """Uniform(-1, 1) arrays for every input (shapes completed by MXNet's inference).

    ``special`` maps an input name to ``fn(shape, rng) -> array`` (e.g. indices).
    """
    dtypes = dtypes or {}
    arg_shapes, _, aux_shapes = symbol.infer_shape(**shapes)
    names = symbol.list_arguments() + symbol.list_auxiliary_states()
    rng = np.random.RandomState(seed)
    arrays = {}
    for name, shape in zip(names, arg_shapes + aux_shapes):
        if special and name in special:
            arrays[name] = special[name](shape, rng)
        else:
            arrays[name] = rng.uniform(-1, 1, size=shape).astype(dtypes.get(name, "float32"))
    return arrays


def assert_outputs_close(actual, expected):
    assert len(actual) == len(expected)
    for k, (a, e) in enumerate(zip(actual, expected)):
        assert a.shape == e.shape, "output %d: shape %s, MXNet %s" % (k, a.shape, e.shape)
        assert a.dtype == e.dtype, "output %d: dtype %s, MXNet %s" % (k, a.dtype, e.dtype)
        np.testing.assert_allclose(a, e, rtol=RTOL, atol=ATOL, err_msg="output %d" % k)


def check_against_mxnet(symbol, shapes, symbolic_dims=None, sizes=(2, 5), dtypes=None,
                        special=None):
    """Converts ``symbol`` whole, compiles once, and matches MXNet's outputs.

    With ``symbolic_dims`` the module is compiled once with those dims symbolic
    and run for each size in ``sizes``.
    """
    mod, input_names, _ = build_graph_module(symbol, shapes, dtypes, symbolic_dims)
    vm = compile_module(mod)
    for size in sizes if symbolic_dims else (None,):
        run_shapes = {name: concrete(shape, (symbolic_dims or {}).get(name, {}), size)
                      for name, shape in shapes.items()}
        inputs = make_inputs(symbol, run_shapes, dtypes, special, seed=size or 0)
        assert_outputs_close(run_main(vm, [inputs[n] for n in input_names]),
                             run_mxnet(symbol, inputs))


def run_plan(symbol, inputs, shapes, dtypes=None, symbolic_dims=None):
    """Runs the graph through tvm_bridge's executor (SegmentedGraph, every TVM
    segment kept on TVM), built for ``shapes``; returns the graph outputs as numpy.
    Asserts that the call ran the plan, each segment TVM converts on TVM and the
    others in MXNet, and that nothing failed."""
    names = symbol.list_inputs()
    examples = make_inputs(symbol, shapes, dtypes)
    plan = SegmentedGraph(symbol, names, [mx.nd.array(examples[n], dtype=examples[n].dtype)
                                          for n in names],
                          symbolic_dims=symbolic_dims, cache_dir=COMPILE_CACHE.name,
                          choose_by_measurement=False)
    outputs = plan(*[mx.nd.array(inputs[n], dtype=inputs[n].dtype) for n in names])
    report = plan.report()
    assert report["failures"] == [] and report["calls"] == {"plan": 1, "whole graph": 0}, report
    assert [segment["backend"] for segment in report["segments"]] == [
        "tvm" if segment["convertible"] else "mxnet" for segment in report["segments"]], report
    return [out.asnumpy() for out in outputs]


def partition_symbol(symbol, shapes, dtypes=None, symbolic_dims=None):
    return partition(load_graph(symbol), shapes, dtypes, symbolic_dims)


def check_hybrid_block(block, make_batch, symbolic_dims, sizes=(2, 3)):
    """Converts a hybridized block's graph whole; matches the block's outputs per batch size.

    ``make_batch(size)`` returns the block's input arrays (numpy) for one batch size;
    the module is compiled once, with ``symbolic_dims`` symbolic.
    """
    block.hybridize()
    first = make_batch(sizes[0])
    block(*[mx.nd.array(a) for a in first])
    symbol_inputs, symbol = block._cached_graph
    names = [s.name for s in symbol_inputs]
    params = {p.name: p.data().asnumpy() for p in block.collect_params().values()}
    shapes = dict(zip(names, (a.shape for a in first)), **{n: v.shape for n, v in params.items()})
    mod, input_names, _ = build_graph_module(symbol, shapes, symbolic_dims=symbolic_dims)
    vm = compile_module(mod)
    for size in sizes:
        batch = make_batch(size)
        expected = block(*[mx.nd.array(a) for a in batch])
        expected = expected if isinstance(expected, (list, tuple)) else [expected]
        values = dict(zip(names, batch), **params)
        assert_outputs_close(run_main(vm, [values[n] for n in input_names]),
                             [e.asnumpy() for e in expected])
    return mod
