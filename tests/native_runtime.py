"""The C runtime from the tests: building tests/native/run_model.c against it, writing its
calls file and reading its results (the formats are in run_model.c's header)."""
import os
import struct
import subprocess

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(REPO, "build")
RUNTIME_LIB = os.path.join(BUILD, "libgluon_dyn_runtime.so")
HEADER_DIR = os.path.join(REPO, "src", "runtime")
RUN_MODEL_SOURCE = os.path.join(REPO, "tests", "native", "run_model.c")


def compile_c(source, output):
    """`source` compiled as C99 (warnings are errors) and linked with the runtime as the
    README says; returns the executable's path."""
    assert os.path.exists(RUNTIME_LIB), "%s is missing: `make runtime` builds it" % RUNTIME_LIB
    command = ["cc", "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", "-I" + HEADER_DIR,
               source, "-o", output, "-L" + BUILD, "-lgluon_dyn_runtime",
               "-Wl,-rpath," + BUILD, "-pthread", "-lm"]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, "cannot compile %s:\n%s" % (source, done.stderr)
    return output


def clean_environment():
    """What a program started with nothing set gets: no LD_LIBRARY_PATH, no PYTHONPATH, no
    MXNet or TVM variables."""
    return {"PATH": "/usr/bin:/bin"}


def write_calls(path, calls):
    """Each call: a list of inputs, each a float32 array, or (ndim, dims) for a malformed
    input with no data."""
    with open(path, "wb") as f:
        f.write(struct.pack("<i", len(calls)))
        for inputs in calls:
            f.write(struct.pack("<i", len(inputs)))
            for array in inputs:
                if isinstance(array, tuple):
                    ndim, dims = array
                    f.write(struct.pack("<i", ndim))
                    f.write(np.asarray(dims, dtype="<i8").tobytes())
                    f.write(struct.pack("<q", 0))
                    continue
                array = np.ascontiguousarray(array, dtype="<f4")
                f.write(struct.pack("<i", array.ndim))
                f.write(np.asarray(array.shape, dtype="<i8").tobytes())
                f.write(struct.pack("<q", array.size))
                f.write(array.tobytes())


def read_results(path):
    """Per call: a list of float32 arrays, or the error message (a str)."""
    results = []
    with open(path, "rb") as f:
        data = f.read()
    offset = 0

    def take(fmt):
        nonlocal offset
        values = struct.unpack_from(fmt, data, offset)
        offset += struct.calcsize(fmt)
        return values

    while offset < len(data):
        (status,) = take("<i")
        if status != 0:
            (length,) = take("<i")
            results.append(data[offset:offset + length].decode())
            offset += length
            continue
        (count,) = take("<i")
        outputs = []
        for _ in range(count):
            (ndim,) = take("<i")
            shape = take("<%dq" % ndim)
            size = int(np.prod(shape))
            outputs.append(np.frombuffer(data, "<f4", size, offset).reshape(shape).copy())
            offset += 4 * size
        results.append(outputs)
    return results


def run_model(runner, prefix, calls, workdir, timeout=300):
    """Runs the calls through `runner` in a process started with nothing set; returns
    (results, stdout lines)."""
    calls_path, results_path = os.path.join(workdir, "calls.bin"), os.path.join(workdir,
                                                                                "results.bin")
    write_calls(calls_path, calls)
    done = subprocess.run([runner, prefix, calls_path, results_path], capture_output=True,
                          text=True, timeout=timeout, env=clean_environment())
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr[-3000:])
    return read_results(results_path), done.stdout.splitlines()
