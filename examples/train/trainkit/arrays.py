"""NumPy data handed to MXNet once per step."""
import mxnet as mx
import numpy as np


def batch_array(values):
    """`values` (NumPy data, a list) as a float32 NDArray, as `mx.nd.array` makes it,
    without its second copy: a fresh NumPy copy handed over through DLPack.
    `mx.nd.array` copies through the engine, 170 us for a LeNet batch against 20 us
    here, on every step of every variant (PyTorch's twins use torch.from_numpy)."""
    return mx.nd.from_numpy(np.array(values, dtype=np.float32, order="C"), zero_copy=True)
