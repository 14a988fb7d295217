"""Puts examples/train (the training scripts and their trainkit package) on the
import path of the tests that run them."""
import os
import sys

TRAIN_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                         "examples", "train")
if TRAIN_DIR not in sys.path:
    sys.path.insert(0, TRAIN_DIR)

from trainkit import local_workers  # noqa: E402,F401
