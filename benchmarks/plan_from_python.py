"""A tvm_bridge plan called from Python as a deployment calls it: numpy, mxnet, tvm and
tvm_bridge/deploy_loader.py loaded by path (no gluon_dyn), inputs made from numpy arrays each
call, outputs waited for. For deploy_runtime.py, in a process of its own:

    python benchmarks/plan_from_python.py PREFIX REPEATS INPUT...

INPUT as runtime_overhead.c takes it ("2x3x4": sin(0.37 k) at element k; "1=2": all 2).
Prints "first_output <value>" (output 0's first element) and "python_us <median>".
"""
import importlib.util
import os
import statistics
import sys
import time

import mxnet as mx
import numpy as np

WARMUP = 20
LOADER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tvm_bridge",
                      "deploy_loader.py")


def arrays_of(inputs):
    """The numpy arrays runtime_overhead.c and RuntimeOverhead.java build from `inputs`."""
    arrays = []
    for spec in inputs:
        shape_text, _, value = spec.partition("=")
        shape = tuple(int(d) for d in shape_text.split("x"))
        if value:
            arrays.append(np.full(shape, float(value), np.float32))
        else:
            arrays.append(np.sin(0.37 * np.arange(np.prod(shape))).astype(np.float32).reshape(shape))
    return arrays


def main(prefix, repeats, inputs):
    spec = importlib.util.spec_from_file_location("deploy_loader", LOADER)
    loader = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loader)
    plan = loader.load_plan(prefix)
    arrays = arrays_of(inputs)

    def call():
        out = plan(*[mx.nd.array(a) for a in arrays])
        out = out[0] if isinstance(out, list) else out
        out.wait_to_read()
        return out

    print("first_output %.6g" % call().asnumpy().ravel()[0])
    for _ in range(WARMUP):
        call()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        samples.append((time.perf_counter() - start) * 1e6)
    print("python_us %.2f" % statistics.median(samples))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3:])
