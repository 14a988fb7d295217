"""Running an exported segmented plan without gluon_dyn or tvm_bridge.

`CompiledBlock.export(prefix)` writes MXNet's prefix-symbol.json and
prefix-0000.params, one library per TVM segment and prefix-plan.json, which
lists the steps in order: each names the values it reads and writes, and is
either a TVM library or an MXNet graph (its symbol JSON inline). The plan has a
version number (PLAN_VERSION); a loader reads the version it was written for.
`load_plan(prefix)` returns a callable taking the block's data inputs.

Before each TVM step the types of its inputs are checked against those it was
compiled for (the shapes of values after a _cond/_while_loop are known only as
the graph runs); a call where they differ runs as the whole MXNet graph
(prefix-symbol.json) instead. The C runtime (src/runtime/) reads the same files.

This file imports numpy, mxnet, tvm and runtime.py (read from beside this file
when it is loaded by path), so the two files can be copied beside a model.
"""
import importlib.util
import json
import os
import zlib

import mxnet as mx

PLAN_SUFFIX = "-plan.json"
PLAN_VERSION = 2  # src/runtime/model.cc reads the same (kPlanVersion)
PLAN_KIND = "tvm_bridge segmented plan"


def _runtime_module():
    if __package__:
        from . import runtime  # pylint: disable=import-outside-toplevel
        return runtime
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runtime.py")
    if not os.path.exists(path):
        raise ImportError("deploy_loader needs runtime.py beside it; %s does not exist" % path)
    spec = importlib.util.spec_from_file_location("tvm_bridge_standalone_runtime", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


runtime = _runtime_module()


class _TypesDiffer(Exception):
    """A TVM step's inputs have other shapes or dtypes than it was compiled for."""


class DeployedPlan:
    """Calls like the exported block: data arrays in, an NDArray (or a list) out.
    Parameters are the values saved at export time. `plan_calls` and `graph_calls`
    count the calls run as the plan and as the whole MXNet graph (`last_difference`
    says why the last of those did)."""

    def __init__(self, manifest, directory, parameters, graph):
        self.manifest = manifest
        self._data_names = manifest["data_inputs"]
        names = self._data_names + sorted(parameters)
        # Values live in slots: the data, the parameters, then each step's outputs.
        slot = {name: k for k, name in enumerate(names)}
        self._constants = [parameters[name] for name in names[len(self._data_names):]]
        missing = [name for name in graph.list_inputs() if name not in slot]
        if missing:
            raise ValueError("%s reads %s, which is neither a data input nor a parameter"
                             % (manifest["graph"], missing))
        self._graph = mx.nd.CachedOp(graph, flags=[("static_alloc", True)])
        self._graph_reads = [slot[name] for name in graph.list_inputs()]
        self.plan_calls = self.graph_calls = 0
        self.last_difference = None
        self._steps = []
        for number, step in enumerate(manifest["steps"]):
            missing = [name for name in step["inputs"] if name not in slot]
            if missing:
                raise ValueError("plan step %d reads %s, which no input, parameter or earlier "
                                 "step provides" % (number, missing))
            reads = [slot[name] for name in step["inputs"]]
            for name in step["outputs"]:
                slot[name] = len(slot)
            writes = [slot[name] for name in step["outputs"]]
            self._steps.append((self._runner(step, directory), reads, writes))
        self._num_slots = len(slot)
        self._outputs = [slot[name] for name in manifest["outputs"]]
        self._returns_list = manifest["returns"] == "list"

    def _runner(self, step, directory):
        if step["backend"] == "tvm":
            library = os.path.join(directory, step["library"])
            _check_library(library, step)
            function = runtime.load_library(library, os.path.join(directory, step["signature"]))

            def run_tvm(*arrays):
                try:
                    function.signature.check(arrays)
                except ValueError as difference:
                    raise _TypesDiffer("%s: %s" % (step["library"], difference)) from None
                return _as_list(function.call_unchecked(*arrays))

            return run_tvm
        symbol = mx.sym.load_json(json.dumps(step["symbol"]))
        cached = mx.nd.CachedOp(symbol, flags=[("static_alloc", True),
                                               ("static_shape", self.manifest["static_shape"])])
        return lambda *arrays: _as_list(cached(*arrays))

    def __call__(self, *data):
        if len(data) != len(self._data_names):
            raise TypeError("the plan takes %d data inputs (%s), got %d" % (
                len(self._data_names), ", ".join(self._data_names), len(data)))
        values = list(data) + self._constants
        try:
            outputs = self._run_plan(values)
            self.plan_calls += 1
        except _TypesDiffer as difference:
            self.graph_calls += 1
            self.last_difference = str(difference)
            outputs = _as_list(self._graph(*[values[k] for k in self._graph_reads]))
        return outputs if self._returns_list else outputs[0]

    def _run_plan(self, values):
        values = values + [None] * (self._num_slots - len(values))
        for run, reads, writes in self._steps:
            for slot, result in zip(writes, run(*[values[k] for k in reads])):
                values[slot] = result
        return [values[k] for k in self._outputs]


def load_plan(prefix):
    """The DeployedPlan exported under `prefix`."""
    path = prefix + PLAN_SUFFIX
    if not os.path.exists(path):
        raise FileNotFoundError("exported plan: %s does not exist" % path)
    with open(path) as f:
        manifest = json.load(f)
    _check_version(manifest, path)
    directory = os.path.dirname(os.path.abspath(path))
    saved = mx.nd.load(os.path.join(directory, manifest["parameters"]))
    # MXNet's export prefixes names with "arg:" or "aux:".
    parameters = {name.split(":", 1)[-1]: array for name, array in saved.items()}
    graph = mx.sym.load(os.path.join(directory, manifest["graph"]))
    return DeployedPlan(manifest, directory, parameters, graph)


def _check_version(manifest, path):
    """ValueError unless `manifest` is a plan of the version this loader reads."""
    if manifest.get("kind") != PLAN_KIND:
        raise ValueError("%s: not a tvm_bridge plan (its kind is %r, not %r)"
                         % (path, manifest.get("kind"), PLAN_KIND))
    if "version" not in manifest:
        raise ValueError("%s: a plan without a version number, written before plans had one; "
                         "export it again" % path)
    version = manifest["version"]
    if type(version) is not int:  # noqa: E721 - a bool is no version
        raise ValueError("%s: the plan's version %r is not a number" % (path, version))
    if version != PLAN_VERSION:
        raise ValueError("%s: plan version %d is %s the version this loader reads (%d); export "
                         "it again with this version of gluon_dyn, or use the loader of the "
                         "version that wrote it" % (path, version, "newer than" if version >
                                                    PLAN_VERSION else "older than", PLAN_VERSION))


def _check_library(path, step):
    """ValueError unless the library is the one exported (a truncated or damaged shared
    library can crash the dynamic loader)."""
    if not os.path.exists(path):
        raise FileNotFoundError("%s: the plan's TVM library does not exist" % path)
    with open(path, "rb") as f:
        content = f.read()
    if len(content) != step["library_bytes"] or zlib.crc32(content) != step["library_crc32"]:
        raise ValueError("%s: not the library the plan was exported with (%d bytes, checksum "
                         "%08x; the plan expects %d bytes, %08x): truncated or damaged"
                         % (path, len(content), zlib.crc32(content), step["library_bytes"],
                            step["library_crc32"]))


def _as_list(result):
    return list(result) if isinstance(result, (list, tuple)) else [result]
