"""Damaged copies of an exported model's files, for the integrity tests: each copy has one
file truncated, bit-flipped, zeroed over a range, overwritten with garbage or extended with
it, and is checked to differ from the original."""
import os

from deploy_models import copy_model

KINDS = ("truncated", "bit-flipped", "zeroed", "garbage", "appended")


def damaged_copies(prefix, directory, rng, per_kind=2):
    """[(copy's prefix, path of its damaged file, kind)]: `per_kind` copies per kind for
    every file exported under `prefix` (the checksums record included)."""
    base = os.path.basename(prefix)
    suffixes = sorted(name[len(base):] for name in os.listdir(os.path.dirname(prefix))
                      if name.startswith(base + "-"))
    copies = []
    for suffix in suffixes:
        for kind in KINDS:
            for _ in range(per_kind):
                copy_prefix, files = copy_model(prefix, directory, "damaged%03d" % len(copies))
                path = files[suffix]
                with open(path, "rb") as f:
                    data = f.read()
                with open(path, "wb") as f:
                    f.write(damaged(data, kind, rng))
                copies.append((copy_prefix, path, kind))
    return copies


def damaged(data, kind, rng):
    """`data` changed as `kind` says, never left as it was."""
    while True:
        changed = _DAMAGE[kind](bytearray(data), rng)
        if bytes(changed) != data:
            return bytes(changed)


def _truncated(data, rng):
    return data[:rng.choice([0, 1, len(data) // 2, len(data) - 1])]


def _bit_flipped(data, rng):
    for _ in range(rng.randint(1, 9)):
        position = rng.randint(len(data))
        data[position] ^= 1 << rng.randint(8)
    return data


def _zeroed(data, rng):
    start = rng.randint(len(data))
    length = min(len(data) - start, rng.randint(1, 257))
    data[start:start + length] = bytes(length)
    return data


def _garbage(data, rng):
    start = rng.randint(len(data))
    length = min(len(data) - start, rng.randint(1, 257))
    data[start:start + length] = rng.bytes(length)
    return data


def _appended(data, rng):
    return data + rng.bytes(rng.randint(1, 65))


_DAMAGE = {"truncated": _truncated, "bit-flipped": _bit_flipped, "zeroed": _zeroed,
           "garbage": _garbage, "appended": _appended}
