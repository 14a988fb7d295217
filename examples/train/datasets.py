"""Data every machine has: scikit-learn's 8x8 digits (shipped inside the package)
and the source text of Python's standard library. Nothing is downloaded."""
import functools
import os
import sysconfig

import numpy as np

# Modules whose source makes the language model's corpus (~500 KB of text).
STDLIB_MODULES = ["argparse.py", "ast.py", "collections/__init__.py", "dataclasses.py",
                  "difflib.py", "inspect.py", "json/decoder.py", "json/encoder.py",
                  "pathlib.py", "pprint.py", "shutil.py", "string.py", "textwrap.py",
                  "typing.py"]


def digits(test_fraction=0.2, seed=0):
    """(train images, train labels, test images, test labels): 1797 8x8 grey
    images of handwritten digits, pixels scaled to [0, 1], images (N, 1, 8, 8)."""
    from sklearn.datasets import load_digits
    data = load_digits()
    images = (data.images / 16.0).astype("float32")[:, None]
    order = np.random.RandomState(seed).permutation(len(images))
    test = int(len(images) * test_fraction)
    return (images[order[test:]], data.target[order[test:]].astype("float32"),
            images[order[:test]], data.target[order[:test]].astype("float32"))


def stdlib_text():
    directory = sysconfig.get_paths()["stdlib"]
    parts = []
    for name in STDLIB_MODULES:
        with open(os.path.join(directory, name), encoding="utf-8") as f:
            parts.append(f.read())
    return "\n".join(parts)


def epoch_batch(count, batch_size, index, seed):
    """The row indices of global batch `index`: epochs of a fixed random order
    (the last partial batch of an epoch is dropped)."""
    per_epoch = count // batch_size
    if per_epoch == 0:
        raise ValueError("batch size %d is larger than the data (%d rows)" % (batch_size, count))
    epoch, position = divmod(index, per_epoch)
    return _epoch_order(count, seed * 7777 + epoch)[position * batch_size:
                                                    (position + 1) * batch_size]


@functools.lru_cache(maxsize=4)
def _epoch_order(count, seed):
    # Drawn once per epoch: a RandomState takes ~130 us to make, a step of a small
    # model a few ms (every variant of a script shares this).
    order = np.random.RandomState(seed).permutation(count)
    order.flags.writeable = False
    return order
