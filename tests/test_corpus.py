"""The corpus of real programs (tests/corpus/, issue 26), as written and through
hybridize(dynamic=True).

Each program must compute what it computes as written (outputs to 1e-5, losses,
gradients and parameters after 3 optimizer steps, Python state left on its
blocks): a difference fails its test, whatever its expected file says. Then how
it was served (status, share of calls on graphs, graph breaks, graphs) must match
tests/corpus/expected/<program>.json, as PyTorch's CI checks its model suites
against expected CSVs: worse fails, and so does better until the file says so.
`CORPUS_UPDATE=1 .venv/bin/python -m pytest tests/test_corpus.py` rewrites the
files from the run.

The issue's floors over the whole corpus (share on graphs, speed, first calls,
memory) are measured and reported by `make corpus` (corpus/floors.py), since no
pass/fail test times anything.
"""
import functools
import json
import os

import pytest

import corpus
from corpus.compare import STATUSES, Wrong, run_twins

HERE = os.path.dirname(os.path.abspath(__file__))
EXPECTED = os.path.join(HERE, "corpus", "expected")
UPDATE = os.environ.get("CORPUS_UPDATE") == "1"
PROGRAMS = corpus.programs()


@functools.lru_cache(maxsize=None)
def outcome(name):
    """The Figures of the program called `name`, or the Wrong it raised (run once per
    session, for its own test and for the floors)."""
    try:
        return run_twins(corpus.named(name))[2]
    except Wrong as wrong:
        return wrong


def expected_path(name):
    return os.path.join(EXPECTED, name + ".json")


def worse(got, expected):
    """How `got` (Figures.expected()) is worse than `expected`, in words."""
    found = []
    if STATUSES.index(got["status"]) > STATUSES.index(expected["status"]):
        found.append("status %s, was %s" % (got["status"], expected["status"]))
    if (got["share_on_graphs"] or 0) < (expected["share_on_graphs"] or 0):
        found.append("share of calls on graphs %s, was %s" % (got["share_on_graphs"],
                                                               expected["share_on_graphs"]))
    same_status = got["status"] == expected["status"]
    if same_status and got["graph_breaks"] > expected["graph_breaks"]:
        found.append("%d graph breaks, was %d" % (got["graph_breaks"], expected["graph_breaks"]))
    if same_status and got["graphs"] > expected["graphs"]:
        found.append("%d graphs, was %d" % (got["graphs"], expected["graphs"]))
    return found


@pytest.mark.long
@pytest.mark.parametrize("name", [program.name for program in PROGRAMS])
def test_program_is_correct_and_no_worse_than_expected(name):
    figures = outcome(name)
    if isinstance(figures, Wrong):
        raise figures
    got = dict(figures.expected(), cause=figures.cause())
    if UPDATE:
        os.makedirs(EXPECTED, exist_ok=True)
        with open(expected_path(name), "w") as file:
            json.dump(got, file, indent=1, sort_keys=True)
            file.write("\n")
        return
    assert os.path.exists(expected_path(name)), \
        "%s has no expected file: run CORPUS_UPDATE=1 .venv/bin/python -m pytest " \
        "tests/test_corpus.py -k %s" % (name, name)
    with open(expected_path(name)) as file:
        expected = json.load(file)
    figures_only = {key: value for key, value in expected.items() if key != "cause"}
    found = worse(got, figures_only)
    assert not found, "%s got worse: %s (%s). Cause now: %s" % (
        name, "; ".join(found), expected_path(name), got["cause"])
    assert figures.expected() == figures_only, \
        "%s improved: %s, expected %s; record it with CORPUS_UPDATE=1 .venv/bin/python -m " \
        "pytest tests/test_corpus.py -k %s" % (name, figures.expected(), figures_only, name)


@pytest.mark.long
def test_every_program_under_half_on_graphs_says_why():
    outcomes = {program.name: outcome(program.name) for program in PROGRAMS}
    unexplained = sorted(name for name, figures in outcomes.items()
                         if not isinstance(figures, Wrong) and (figures.share or 0) < 0.5
                         and not figures.cause())
    assert not unexplained, "under 50%% on graphs with no cause recorded: %s" % unexplained
