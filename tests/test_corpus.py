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

`test_corpus_meets_its_floors` asserts the issue's floors over the whole corpus;
its speed, first-call and memory floors read the measurements `make corpus` writes
(docs/corpus.json), since no pass/fail test times anything.
"""
import functools
import json
import os
import statistics

import pytest

import corpus
from corpus.compare import STATUSES, Wrong, run_twins

HERE = os.path.dirname(os.path.abspath(__file__))
EXPECTED = os.path.join(HERE, "corpus", "expected")
MEASURED = os.path.join(os.path.dirname(HERE), "docs", "corpus.json")
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


def corpus_figures():
    """{name: Figures or Wrong} over the whole corpus."""
    return {program.name: outcome(program.name) for program in PROGRAMS}


def test_corpus_meets_its_floors():
    """The floors of issue 26's "Done when", over every program."""
    outcomes = corpus_figures()
    wrong = sorted(name for name, figures in outcomes.items() if isinstance(figures, Wrong))
    correct = {name: figures for name, figures in outcomes.items()
               if not isinstance(figures, Wrong)}
    failures = []
    if wrong:
        failures.append("programs computing something else than as written: %s" % wrong)
    calls = sum(figures.calls for figures in correct.values())
    on_graphs = sum(figures.on_graphs for figures in correct.values())
    if on_graphs < 0.9 * calls:
        failures.append("%.1f%% of the corpus's calls after profiling ran on graphs (%d of %d), "
                        "floor 90%%" % (100.0 * on_graphs / calls, on_graphs, calls))
    unexplained = [name for name, figures in correct.items()
                   if (figures.share or 0) < 0.5 and not figures.cause()]
    if unexplained:
        failures.append("under 50%% on graphs with no cause recorded: %s" % unexplained)
    unbroken = [name for name, figures in correct.items()
                if figures.status == "graphs" and not figures.graph_breaks]
    if len(unbroken) < 0.7 * len(correct):
        failures.append("%d of %d working programs run on graphs with no graph break, floor 70%%"
                        % (len(unbroken), len(correct)))
    failures.extend(measured_floor_failures())
    assert not failures, "\n".join(failures)


def measured_floor_failures():
    """The floors on what `make corpus` measured (docs/corpus.json)."""
    if not os.path.exists(MEASURED):
        return ["no measurements: run `make corpus` (writes %s)" % MEASURED]
    with open(MEASURED) as file:
        rows = json.load(file)["programs"]
    failures = []
    for kind, floor in (("inference", 1.5), ("training", 1.3)):
        speeds = {row["name"]: row["speed"][kind] for row in rows
                  if row["speed"].get(kind) is not None}
        slow = sorted(name for name, speed in speeds.items() if speed < 0.95)
        if slow:
            failures.append("%s speed under 0.95x imperative: %s" % (kind, slow))
        if speeds and statistics.median(speeds.values()) < floor:
            failures.append("median %s speed %.2fx, floor %.1fx"
                            % (kind, statistics.median(speeds.values()), floor))
    tree = [row for row in rows if row["name"] == "tree_lstm_similarity"]
    if not tree or (tree[0]["speed"].get("inference") or 0) < 4:
        failures.append("the child-sum Tree-LSTM on new trees: %s, floor 4x"
                        % (tree[0]["speed"] if tree else "not measured"))
    for row in rows:
        if row["first_call_s"] is not None and row["first_call_s"] > 120:
            failures.append("%s: first calls take %.0f s, limit 120 s"
                            % (row["name"], row["first_call_s"]))
        if row["peak_memory"] is not None and row["peak_memory"] > 1.1:
            failures.append("%s: peak memory %.2fx imperative, limit 1.1x"
                            % (row["name"], row["peak_memory"]))
    return failures
