"""Checkpoints: parameters, trainer states (momenta, Adam moments, step counts),
arrays the run carries between steps (an LM's hidden state) and the loss history,
in one directory replaced atomically (a run killed while saving keeps the last
complete checkpoint)."""
import json
import os
import shutil

import mxnet as mx

PROGRESS = "progress.json"


def save(directory, step, losses, blocks, trainers, arrays):
    partial = directory.rstrip("/") + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    os.makedirs(partial)
    for name, block in blocks.items():
        block.save_parameters(os.path.join(partial, name + ".params"))
    for name, trainer in trainers.items():
        trainer.save_states(os.path.join(partial, name + ".states"))
    if arrays:
        mx.nd.save(os.path.join(partial, "arrays.nd"), arrays)
    with open(os.path.join(partial, PROGRESS), "w") as f:
        json.dump({"step": step, "losses": losses}, f)
    old = directory.rstrip("/") + ".old"
    shutil.rmtree(old, ignore_errors=True)
    if os.path.isdir(directory):
        os.rename(directory, old)
    os.rename(partial, directory)
    shutil.rmtree(old, ignore_errors=True)


def load(directory, blocks, trainers):
    """Loads into `blocks` and `trainers`; returns (steps done, losses, arrays)."""
    progress_file = os.path.join(directory, PROGRESS)
    if not os.path.isfile(progress_file):
        raise FileNotFoundError("no checkpoint to resume from in %s (missing %s)"
                                % (directory, PROGRESS))
    with open(progress_file) as f:
        progress = json.load(f)
    for name, block in blocks.items():
        block.load_parameters(os.path.join(directory, name + ".params"))
    for name, trainer in trainers.items():
        trainer.load_states(os.path.join(directory, name + ".states"))
    arrays_file = os.path.join(directory, "arrays.nd")
    arrays = mx.nd.load(arrays_file) if os.path.isfile(arrays_file) else {}
    return progress["step"], progress["losses"], arrays
