"""The PyTorch worker process of harness.TorchProcess: one program of torch_twins.py,
served over a Pipe. It imports numpy and torch, never MXNet: MXNet's OpenMP runtime and
PyTorch's own each keep a team of spinning threads, and in one process they slow each
other (harness.py says by how much).

Every request gets one reply, ("ok", value) or ("error", traceback text); after an error
the worker ends. Requests:
- ("prepare", arguments): the numpy arguments of one call, made the program's (torch
  tensors) and kept under a new token, the reply's value; a token serves one run;
- ("run", variant, token): one call ("pytorch eager" or "torch.compile") on the token's
  arguments; the value is (outputs as numpy arrays, milliseconds of the call here);
- ("close",): the worker ends without a reply.
"""
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
    return [output.detach().numpy()]


def serve(connection, builder, arguments, train, threads):
    """Builds torch_twins' `builder` with `arguments`, replies ("ok", None) once ready,
    then serves requests until "close" or the parent's end of the Pipe closes.
    `train`: every run zeroes the parameters' gradients, runs forward and backward of the
    output's sum; otherwise forward under no_grad."""
    try:
        build = getattr(torch_twins, builder)
        if TORCH_PACKAGES not in sys.path:
            sys.path.insert(0, TORCH_PACKAGES)
        import torch  # pylint: disable=import-outside-toplevel
        torch.set_num_threads(threads)
        built = build(torch, *arguments)
        forward, parameters = built[:2]
        prepare = built[2] if len(built) > 2 else _tensors(torch)
        programs = {"pytorch eager": forward}
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
            _, variant, token = request
            if variant == "torch.compile" and variant not in programs:
                programs[variant] = torch.compile(forward)
            program, call_arguments = programs[variant], prepared.pop(token)
            start = time.perf_counter()
            if train:
                for param in parameters:
                    param.grad = None
                out = program(*call_arguments)
                out.sum().backward()
            else:
                with torch.no_grad():
                    out = program(*call_arguments)
            ms = (time.perf_counter() - start) * 1000
            connection.send(("ok", (_as_numpy(out), ms)))
    except EOFError:   # the parent ended
        return
    except Exception:  # pylint: disable=broad-except
        try:
            connection.send(("error", traceback.format_exc()))
        except OSError:    # the parent ended meanwhile
            pass
