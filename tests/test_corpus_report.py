"""benchmarks/corpus_report.py's rows: a program whose calls cannot be timed gets a
row saying why, and the report goes on to the next program (d2l's SSD training
raised out of the report once, and no table was written)."""
import os
import sys

import mxnet as mx
from mxnet import gluon

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
import corpus_report  # noqa: E402
from corpus.floors import misses  # noqa: E402
from corpus.program import Program, uniform  # noqa: E402


def dense():
    block = gluon.nn.Dense(3, in_units=4)
    block.initialize()
    return block


def refused_loss(model, x):
    raise RuntimeError("labels were never given\nsecond line")


PROGRAM = Program(name="dense_without_labels", package="written here", covers="a test",
                  build=dense, inputs=lambda call: (uniform((2, 4), call),),
                  batch=lambda step: (uniform((2, 4), 100 + step),), loss=refused_loss)


def test_a_program_whose_training_raises_is_timed_for_inference_and_says_why_not_for_training():
    measured, _, not_timed = corpus_report.speeds(PROGRAM)
    assert measured["inference"] > 0 and measured["training"] is None
    assert not_timed == {"training": "RuntimeError: labels were never given"}
    row = {"name": PROGRAM.name, "correct": True, "wrong": "", "share_on_graphs": 1.0,
           "status": "graphs", "graph_breaks": 0, "speed": measured, "first_call_s": 0.1,
           "peak_memory": 1.0, "not_timed": not_timed}
    assert "dense_without_labels, training: not timed (RuntimeError: labels were never " \
        "given)" in misses([row])


def test_a_program_whose_process_fails_gets_a_row_saying_so_and_the_table_goes_on():
    # The process finds no corpus program of this name (KeyError): its row says how it
    # ended, the floors count it as not correct, and the table still renders.
    row = corpus_report.row_in_own_process(PROGRAM)
    assert not row["correct"] and row["wrong"] == "its process exited with status 1"
    assert "dense_without_labels is not correct: its process exited with status 1" in \
        misses([row])
    assert "| dense_without_labels | written here | **no** | - | - | - | - | - | - |" in \
        corpus_report.markdown([row])


def test_the_first_line_of_an_mxnet_error_is_its_last():
    error = mx.base.MXNetError("Traceback (most recent call last):\n  File x\n"
                               "MXNetError: Check failed: in place")
    assert corpus_report._first_line(error) == "MXNetError: Check failed: in place"
