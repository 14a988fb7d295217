"""The program generator behind `make fuzz` (tests/fuzzing/): programs are valid Python,
reproducible from a seed, and shrink to smaller valid programs."""
import random

import pytest

from fuzzing import differential, programs
from fuzzing.programs import Program


def test_programs_are_reproducible_valid_python():
    for seed in range(20):
        source = programs.render(programs.generate(seed))
        assert source == programs.render(programs.generate(seed))
        compile(source, "program_%d.py" % seed, "exec")


def test_shrinking_removes_what_does_not_matter():
    program = programs.generate(5)
    candidates = list(programs.shrink_candidates(program))
    assert candidates and all(len(programs.render(c)) < len(programs.render(program))
                              for c in candidates)


def test_a_small_generated_program_agrees_with_imperative():
    body = [("assign", "v0", "v1", "v2", 0, 0.5, "d0"),
            ("if_tensor", "v0", 0.1, [("append", "v1")], [("state", "v2", False)]),
            ("while", [("assign", "v2", "v0", "v2", 1, -0.3, "d1")])]
    for hybrid in (False, True):
        assert differential.disagreement(programs.Program(hybrid, body), call_seed=3) is None


# Programs the fuzzer found disagreeing or crashing, shrunk; each must now agree
# with imperative execution *and* run as graphs (no fallback).
REGRESSIONS = {
    # A failed guard raised when the cached graph was invoked, not at the first read.
    "early return under two tensor ifs": (Program(False, [
        ("helper", "v1", "v1", "d0"), ("assign", "v2", "v0", "v1", 2, 0.0, "d0"),
        ("helper", "v0", "v2", "d0"),
        ("if_tensor", "v1", -1.6, [("if_tensor", "v0", 1.15, [], [("return", "v1", -1.12)])],
         [])]), 414568529),
    # `for t in range(n)` whose `break` depends on a tensor: bool() of a Symbol.
    "tensor break in a Python range loop": (Program(False, [
        ("for_range", [("assign", "v0", "v0", "v1", 1, 0.5, "d0"), ("break", "v0", 0.3)])]), 7),
    # A return inside a nested tensor if: the cond output's shape was unknown.
    "nested return in a HybridBlock": (Program(True, [
        ("if_tensor", "v2", -1.72, [], [("return", "v1", -1.0)])]), 1),
    # Shape inference through a nested _while_loop corrupted MXNet's memory.
    "nested row loops with a return": (Program(False, [
        ("for_rows", "v2", "v2", [("return", "v2", 0.08), ("for_rows", "v0", "v1", [
            ("assign", "v1", "v0", "v1", 0, -0.6, "d0")])])]), 53),
    # MXNet 1.9.1's CachedOp with static_alloc computes wrong input gradients for
    # this graph (plain MXNet hybridize(static_alloc=True) too): recorded runs use
    # a CachedOp without it.
    "static_alloc backward": (Program(False, [
        ("for_rows", "v1", "v2", [("assign", "v1", "v2", "v1", 4, 0.96, "d0")]),
        ("assign", "v0", "v2", "v2", 4, -0.02, "d0")]), 270730103),
    # `not do_return and not break_` with one side still a Python bool.
    "tensor and Python flags combined": (Program(False, [
        ("for_rows", "v0", "v0", [("if_python", [("break", "v2", -0.32)],
                                   [("return", "v0", 0.56)])])]), 12),
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_regression(name):
    program, call_seed = REGRESSIONS[name]
    reports = []
    assert differential.disagreement(program, call_seed, reports) is None
    assert reports[0]["fallback"] is None and reports[0]["traces"] > 0, reports[0]


# A bounded, fixed-seed share of what `make fuzz` does, in chunks so that a
# failure names its chunk (re-run one with -k).
BATCH_SEED, CHUNKS, PROGRAMS_PER_CHUNK = 2026, 4, 25


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_generated_programs_agree_with_imperative(chunk):
    rng = random.Random(BATCH_SEED * 100 + chunk)
    problems = []
    for _ in range(PROGRAMS_PER_CHUNK):
        program_seed, call_seed = differential.random_case(rng)
        problem = differential.disagreement(programs.generate(program_seed), call_seed)
        if problem:
            problems.append("program %d, calls %d: %s" % (program_seed, call_seed, problem))
    assert not problems, "\n".join(problems)
