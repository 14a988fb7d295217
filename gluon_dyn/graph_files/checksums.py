"""Checksums of exported files: `prefix-checksums.json`, beside the files it covers.

Every export (a block hybridized with dynamic=True, a plain HybridBlock's
`export`, tvm_bridge's CompiledBlock.export) ends by recording the size and CRC-32
of each file it wrote: MXNet's `prefix-symbol.json` and `prefix-NNNN.params`, and
for a plan `prefix-plan.json` with each TVM step's library and signature. MXNet's
own files are not changed, so MXNet alone still loads them. The C runtime (and the
Java binding through it) checks each file against this record before reading it,
and refuses one that is missing from it, truncated or damaged, naming the file: a
damaged parameter file otherwise loads and runs, printing other numbers.

Files are recorded under their names after the prefix ("-symbol.json"), so a
model's files renamed together (prefix "model" to "v2") stay covered; a plan names
its files, so renaming a plan's files means exporting it again. The record is
compact JSON without whitespace: any change to its bytes changes what it says or
makes it unreadable, and the runtime then refuses the model.

Without a record the runtime refuses the model too, saying how to make one: files
exported by gluon_dyn always have it, so its absence means the files come from
elsewhere (MXNet's own export, an older gluon_dyn, a copy that lost a file). For
files a user trusts, `python -m gluon_dyn.export.record_checksums PREFIX [EPOCH]`
records them as they are.

CRC-32 (zlib's) with the size detects accidental damage (truncation, flipped bits,
zeroed or overwritten ranges) with certainty for bursts up to 32 bits and a chance
of 2^-32 otherwise; it is what the plan already records for its libraries, so the
runtime has one checksum. It is no protection against deliberate changes: whoever
can change a file can change its record.
"""
import json
import os
import zlib

KIND = "gluon_dyn export checksums"
VERSION = 1  # src/runtime/checksum.cc reads the same (kChecksumsVersion)
SUFFIX = "-checksums.json"
PLAN_SUFFIX = "-plan.json"  # tvm_bridge.deploy_loader.PLAN_SUFFIX (TVM loads only where used)
_CHUNK = 1 << 20


def write(prefix, epoch=0, plan=False):
    """Record the files exported under `prefix`: the symbol, the parameters of
    `epoch` and, with `plan`, the plan and the files its steps name. Returns the
    record's path."""
    base, directory = os.path.basename(prefix), os.path.dirname(os.path.abspath(prefix))
    names = ["%s-symbol.json" % base, "%s-%04d.params" % (base, epoch)]
    if plan:
        names.append(base + PLAN_SUFFIX)
        names += _plan_files(os.path.join(directory, base + PLAN_SUFFIX))
    files = {}
    for name in names:
        if not name.startswith(base + "-"):
            raise ValueError("%s: an exported file outside the prefix %s" % (name, prefix))
        files[name[len(base):]] = _checksum(os.path.join(directory, name))
    record = {"kind": KIND, "version": VERSION, "algorithm": "crc32", "files": files}
    path = prefix + SUFFIX
    with open(path, "w") as f:
        json.dump(record, f, separators=(",", ":"), sort_keys=True)
    return path


def _plan_files(plan_path):
    """The files a plan's TVM steps load (tvm_bridge/plan_export.py writes them)."""
    with open(plan_path) as f:
        steps = json.load(f)["steps"]
    return [step[key] for step in steps if step["backend"] == "tvm"
            for key in ("library", "signature")]


def _checksum(path):
    crc, size = 0, 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            crc, size = zlib.crc32(chunk, crc), size + len(chunk)
    return {"bytes": size, "crc32": crc}
