"""The corpus of real programs (issue 26): models as GluonCV 0.10.5, GluonNLP 0.10.0
and d2l 1.0.3 install them, and programs written here in the older styles MXNet's
own examples use; each one declared as a `Program` (program.py), run as written and
through hybridize(dynamic=True) by compare.py. tests/test_corpus.py runs them all;
`make corpus` (benchmarks/corpus_report.py) measures them."""
import importlib

FAMILIES = ("gluoncv_models", "gluonnlp_models", "d2l_models", "older_styles")


def programs():
    """Every corpus program, by family, in a fixed order."""
    found = []
    for family in FAMILIES:
        found.extend(importlib.import_module("." + family, __name__).PROGRAMS)
    names = [program.name for program in found]
    assert len(set(names)) == len(names), "two corpus programs share a name"
    return found


def named(name):
    """The corpus program called `name`."""
    for candidate in programs():
        if candidate.name == name:
            return candidate
    raise KeyError("no corpus program %r" % name)
