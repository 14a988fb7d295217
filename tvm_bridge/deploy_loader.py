"""Running an exported segmented plan without gluon_dyn or tvm_bridge.

`CompiledBlock.export(prefix)` writes MXNet's prefix-symbol.json and
prefix-0000.params, one library per TVM segment and prefix-plan.json, which
lists the steps in order: each names the values it reads and writes, and is
either a TVM library or an MXNet graph (its symbol JSON inline).
`load_plan(prefix)` returns a callable taking the block's data inputs.

This file imports numpy, mxnet, tvm and runtime.py (read from beside this file
when it is loaded by path), so the two files can be copied beside a model.
"""
import importlib.util
import json
import os

import mxnet as mx

PLAN_SUFFIX = "-plan.json"
PLAN_FORMAT = 1
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


class DeployedPlan:
    """Calls like the exported block: data arrays in, an NDArray (or a list) out.
    Parameters are the values saved at export time."""

    def __init__(self, manifest, directory, parameters):
        self.manifest = manifest
        self._data_names = manifest["data_inputs"]
        names = self._data_names + sorted(parameters)
        # Values live in slots: the data, the parameters, then each step's outputs.
        slot = {name: k for k, name in enumerate(names)}
        self._constants = [parameters[name] for name in names[len(self._data_names):]]
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
            function = runtime.load_library(os.path.join(directory, step["library"]),
                                            os.path.join(directory, step["signature"]))
            return lambda *arrays: _as_list(function(*arrays))
        symbol = mx.sym.load_json(json.dumps(step["symbol"]))
        cached = mx.nd.CachedOp(symbol, flags=[("static_alloc", True),
                                               ("static_shape", self.manifest["static_shape"])])
        return lambda *arrays: _as_list(cached(*arrays))

    def __call__(self, *data):
        if len(data) != len(self._data_names):
            raise TypeError("the plan takes %d data inputs (%s), got %d" % (
                len(self._data_names), ", ".join(self._data_names), len(data)))
        values = list(data) + self._constants
        values += [None] * (self._num_slots - len(values))
        for run, reads, writes in self._steps:
            for slot, result in zip(writes, run(*[values[k] for k in reads])):
                values[slot] = result
        outputs = [values[k] for k in self._outputs]
        return outputs if self._returns_list else outputs[0]


def load_plan(prefix):
    """The DeployedPlan exported under `prefix`."""
    path = prefix + PLAN_SUFFIX
    if not os.path.exists(path):
        raise FileNotFoundError("exported plan: %s does not exist" % path)
    with open(path) as f:
        manifest = json.load(f)
    if manifest.get("kind") != PLAN_KIND or manifest.get("format") != PLAN_FORMAT:
        raise ValueError("%s: not a plan this loader reads (kind %r, format %r; expected %r, %r)"
                         % (path, manifest.get("kind"), manifest.get("format"), PLAN_KIND,
                            PLAN_FORMAT))
    directory = os.path.dirname(os.path.abspath(path))
    saved = mx.nd.load(os.path.join(directory, manifest["parameters"]))
    # MXNet's export prefixes names with "arg:" or "aux:".
    parameters = {name.split(":", 1)[-1]: array for name, array in saved.items()}
    return DeployedPlan(manifest, directory, parameters)


def _as_list(result):
    return list(result) if isinstance(result, (list, tuple)) else [result]
