"""The PyTorch worker process of harness.TorchProcess: one program of torch_twins.py (or
of another module here: a builder named "module.build_xxx", as torch_training.py's),
served over a Pipe. It imports numpy and torch, never MXNet: MXNet's OpenMP runtime and
PyTorch's own each keep a team of spinning threads, and in one process they slow each
other (harness.py says by how much).

A program runs in one of three modes: "inference" (its forward under no_grad), "train"
(forward, then backward of the output's sum) or "step" (a whole training step that its
builder wrote: the worker only calls it).

Every request gets one reply, ("ok", value) or ("error", traceback text); after an error
the worker ends. Requests:
- ("prepare", arguments): the numpy arguments of one call, made the program's (torch
  tensors) and kept under a new token, the reply's value; a token serves one run;
- ("run", variant, token): one call ("pytorch eager" or "torch.compile") on the token's
  arguments; the value is (outputs as numpy arrays, milliseconds of the call here);
- ("run_each", variant, [arguments, ...]): calls one after the other, each on its
  arguments prepared right before it (a training step's seeds: trainkit's loop seeds
  each step before it runs); the value is ([outputs of each], milliseconds of the
  calls, their preparation left out);
- ("compiler_report",): what torch.compile did so far (compiler_report below);
- ("close",): the worker ends without a reply.
"""
import importlib
import itertools
import os
import sys
import time
import traceback

import numpy as np

import torch_twins

# Where `make setup` installs PyTorch (the Makefile's TORCH_DIR): a folder only this
# worker puts on its path, so that processes with MXNet never see torch (GluonCV
# refuses to import beside torch>=2).
TORCH_PACKAGES = os.path.join(sys.prefix, "torch-packages")


def _tensors(torch):
    """The default `prepare`: every numpy argument as a torch tensor."""
    def prepare(arguments):
        return tuple(torch.from_numpy(a) if isinstance(a, np.ndarray) else a for a in arguments)
    return prepare


def _as_numpy(output):
    if isinstance(output, (list, tuple)):
        return [array for item in output for array in _as_numpy(item)]
    if hasattr(output, "detach"):
        return [output.detach().numpy()]
    return [np.asarray(output)]    # a number a training step returned


def _builder(name):
    """The builder `name`: a function of torch_twins, or "module.function" of another
    module beside it."""
    module, _, function = name.rpartition(".")
    return getattr(importlib.import_module(module) if module else torch_twins, function)


def compiler_report(torch):
    """What torch.compile did in this process: graphs compiled, graph breaks by reason,
    and whether a function met Dynamo's recompile limit (its calls past it run eager)."""
    if "torch._dynamo" not in sys.modules:
        return {"graphs": 0, "graph_breaks": {}, "recompile_limit": None}
    counters = torch._dynamo.utils.counters   # pylint: disable=protected-access
    limit = [reason.split("\n")[0] for reason in counters["unimplemented"]
             if "recompile limit" in reason.lower() or "recompile_limit" in reason]
    return {"graphs": counters["stats"]["unique_graphs"],
            "graph_breaks": dict(counters["graph_break"]),
            "recompile_limit": torch._dynamo.config.recompile_limit if limit else None}


def _programs(torch, built, mode):
    """(the programs by variant name, prepare) of what a builder returned in `mode`."""
    if mode == "step":
        return built           # each step variant holds its own model and optimizer
    forward, parameters = built[:2]
    prepare = built[2] if len(built) > 2 else _tensors(torch)

    def around(program):
        def call(*arguments):
            if mode == "train":
                for param in parameters:
                    param.grad = None
                out = program(*arguments)
                out.sum().backward()
                return out
            with torch.no_grad():
                return program(*arguments)
        return call
    # torch.compile wraps the forward on first use: a run of eager calls alone never
    # loads its compiler
    return _Lazy({"pytorch eager": lambda: around(forward),
                  "torch.compile": lambda: around(torch.compile(forward))}), prepare


def _timed(program, arguments):
    """(outputs as numpy arrays, milliseconds) of program(*arguments): PyTorch on the
    CPU has finished its work when the call returns."""
    start = time.perf_counter()
    out = program(*arguments)
    ms = (time.perf_counter() - start) * 1000
    return _as_numpy(out), ms


class _Lazy(dict):
    """Programs made on first use, from {name: function making it}."""

    def __init__(self, makers):
        super().__init__()
        self.makers = makers

    def __missing__(self, name):
        self[name] = self.makers[name]()
        return self[name]


def serve(connection, builder, arguments, mode, threads):
    """Builds the program of `builder` with `arguments` for `mode` ("inference",
    "train" or "step", as the module says), replies ("ok", None) once ready, then serves
    requests until "close" or the parent's end of the Pipe closes."""
    try:
        if TORCH_PACKAGES not in sys.path:
            sys.path.insert(0, TORCH_PACKAGES)
        build = _builder(builder)
        import torch  # pylint: disable=import-outside-toplevel
        torch.set_num_threads(threads)
        programs, prepare = _programs(torch, build(torch, *arguments), mode)
        prepared, tokens = {}, itertools.count()
        connection.send(("ok", None))
        while True:
            request = connection.recv()
            if request[0] == "close":
                return
            if request[0] == "prepare":
                token = next(tokens)
                prepared[token] = prepare(request[1])
                connection.send(("ok", token))
                continue
            if request[0] == "compiler_report":
                connection.send(("ok", compiler_report(torch)))
                continue
            if request[0] == "run_each":
                _, variant, each = request
                outputs, ms = [], 0.0
                for arguments in each:
                    out, call_ms = _timed(programs[variant], prepare(arguments))
                    outputs.append(out)
                    ms += call_ms
                connection.send(("ok", (outputs, ms)))
                continue
            _, variant, token = request
            connection.send(("ok", _timed(programs[variant], prepared.pop(token))))
    except EOFError:   # the parent ended
        return
    except Exception:  # pylint: disable=broad-except
        try:
            connection.send(("error", traceback.format_exc()))
        except OSError:    # the parent ended meanwhile
            pass
