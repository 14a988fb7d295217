"""Where compiled libraries and tuning databases live, and the keys naming them."""
import hashlib
import os

import tvm_ffi

CACHE_ENV = "GLUON_DYN_TVM_CACHE"
DEFAULT_CACHE = os.path.join("~", ".cache", "gluon_dyn", "tvm")


def cache_root(path=None):
    """`path`, else $GLUON_DYN_TVM_CACHE, else ~/.cache/gluon_dyn/tvm; created if missing."""
    root = os.path.expanduser(path or os.environ.get(CACHE_ENV) or DEFAULT_CACHE)
    os.makedirs(root, exist_ok=True)
    return root


def digest(*parts):
    return hashlib.sha256("\x00".join(str(part) for part in parts).encode()).hexdigest()


def module_digest(mod):
    """The printed module does not show bound constants' data; the structural
    hash covers it, the text guards against hash collisions."""
    return digest(mod.script(), tvm_ffi.structural_hash(mod))


def tuning_dir(root, module_key, target_text):
    """One meta-schedule JSON database per module and target (made by tuning)."""
    return os.path.join(root, "tuning", digest(module_key, target_text)[:32])


def tuning_records_path(directory):
    return os.path.join(directory, "database_tuning_record.json")


def file_digest(path):
    """Digest of a file's bytes, or "absent"."""
    if not os.path.exists(path):
        return "absent"
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()
