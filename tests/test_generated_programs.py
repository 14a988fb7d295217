"""The program generator behind `make fuzz` (tests/fuzzing/): programs are valid Python,
reproducible from a seed, and shrink to smaller valid programs; generated programs agree
with imperative execution, and graphs serve at least a floor of their calls."""
import os
import random

import mxnet as mx
import pytest

from fuzzing import differential, programs
from fuzzing.programs import Program
from gluon_dyn.hybridize.timing import speed_check


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
    # this graph (plain MXNet hybridize(static_alloc=True) too): a tanh read 9 times,
    # once by a mean (gluon_dyn/hybridize/passes/gradient_sums.py).
    "static_alloc backward": (Program(False, [
        ("for_rows", "v1", "v2", [("assign", "v1", "v2", "v1", 4, 0.96, "d0")]),
        ("assign", "v0", "v2", "v2", 4, -0.02, "d0")]), 270730103),
    # `not do_return and not break_` with one side still a Python bool.
    "tensor and Python flags combined": (Program(False, [
        ("for_rows", "v0", "v0", [("if_python", [("break", "v2", -0.32)],
                                   [("return", "v0", 0.56)])])]), 12),
    # An unrolled loop whose test became a Python False (a `break` in an inlined
    # branch) was guarded as a tensor: an internal error stopped the trace.
    "break in an inlined branch of an unrolled loop": (Program(False, [
        ("while", [("if_python", [("break", "v0", -1.15)], [])])]), 683768412),
    # A row loop nested in a row loop of a HybridBlock: shape inference of a cond
    # output raised MXNet's `take` axis check on the outer body's placeholder.
    "nested row loops with a continue in a HybridBlock": (Program(True, [
        ("for_rows", "v2", "v1", [("for_rows", "v0", "v0", [
            ("continue", "v0", -0.56), ("assign", "v2", "v0", "v0", 2, 0.59, "d1")])])]),
        425932421),
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_regression(name):
    program, call_seed = REGRESSIONS[name]
    assert_agrees_on_graphs(differential.check(program, call_seed))


# Program files as `make fuzz` wrote them (fuzz-failures/, copied here), each
# headed by the problem it had and its calls, run on those calls. The first three
# (issue 25): a weight's products read after a `_cond` or `_while_loop` (shapes
# unknown) were stacked as if their shapes were known, the products of one layer
# (one node name) sharing one shape looked up by name ("Incompatible attr in node
# ..._with_step_gradient": stacked_weight_gradients.py, graph_json.output_shapes).
# program_750887478_256546479: a variable one branch of a tensor `if` leaves
# unassigned, named live after it by malt but never read unassigned, raised
# ControlFlowError (the `if` now runs as Python). program_92282282_123314837_breaks:
# the graph part before a graph break handed on a variable the break assigns first,
# unassigned where a tensor `if` had not set it (UnboundLocalError).
# program_932036111_224670943_steps (calls as training steps, batched): a HybridBlock
# called three times in one graph named each call's operators alike, and the graph
# cut around the boolean_mask of a conditionally appended list wired every call's
# result to the last call's values (graph_json.with_unique_names).
# program_245304428_782504534 and program_36634870_792200370_steps: a dropout in a
# training call whose graph's guards failed drew its numbers twice, in the graph
# and again in Python (random_states.py puts MXNet's states back in between).
# program_556868562_206852307_steps: the probe pass of a tensor `if` noted the
# branches inside it as top-level ones (stale_gradients.py's conditions), which put
# the probe's nodes in the graph: a Dropout of an inner branch drew on every call.
FUZZER_FILES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fuzzing", "regressions")


@pytest.mark.parametrize("name", sorted(os.listdir(FUZZER_FILES)))
def test_program_the_fuzzer_wrote(name):
    assert_agrees_on_graphs(differential.check_file(os.path.join(FUZZER_FILES, name)))


ILL_CONDITIONED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fuzzing",
                               "ill_conditioned")


@pytest.mark.parametrize("name", sorted(f for f in os.listdir(ILL_CONDITIONED)
                                        if f.endswith(".py")))
def test_an_ill_conditioned_call_is_told_apart_and_a_real_difference_is_not(name):
    path = os.path.join(ILL_CONDITIONED, name)
    outcome = differential.check_file(path)
    assert outcome.problem is None and outcome.ill_conditioned, outcome.report
    named_call = int(open(path).readline().split("call ")[1].split(":")[0])
    assert outcome.ill_conditioned.startswith("call %d " % named_call)
    # At the same call, an input gradient 100 times the imperative one is not
    # excused by the program's sensitivity.
    with open(path) as f:
        text = f.read()
    calls = differential._recorded_calls(text)
    mx.random.seed(0)
    block = differential.load(text)()
    block.initialize(mx.init.Uniform(0.5))
    for call in calls[:named_call]:
        differential._run(block, call)
    before = differential._state(block)
    expected = differential._run(block, calls[named_call])
    wrong = expected[:2] + (expected[2] * 100,) + expected[3:]
    assert not differential._explained_by_conditioning(block, before, calls[named_call],
                                                       expected, wrong)


def test_a_wrong_result_of_a_well_conditioned_call_is_a_disagreement():
    program, call_seed = REGRESSIONS["tensor break in a Python range loop"]
    block = differential.load(programs.render(program))()
    block.initialize()
    call = differential.calls_for(call_seed)[0]
    before = differential._state(block)
    expected = differential._run(block, call)
    wrong = (expected[0], expected[1], expected[2] * (1 + 1e-3)) + expected[3:]
    assert differential._compare(expected, wrong)
    assert not differential._explained_by_conditioning(block, before, call, expected, wrong)


def test_a_program_file_is_checked_on_the_calls_it_names(tmp_path):
    program, call_seed = REGRESSIONS["tensor break in a Python range loop"]
    calls = differential.calls_for(call_seed)
    path = tmp_path / "program.py"
    path.write_text(differential.failure_file("a problem\non two lines",
                                              programs.render(program), calls))
    expected = differential.check(program, call_seed)
    got = differential.check_file(str(path))
    assert got.problem is None and got.report["calls"] == expected.report["calls"]
    assert got.report["calls"]["total"] == len(calls)


def assert_agrees_on_graphs(outcome):
    """No disagreement (an internal error stopping a trace is one), no fallback to
    Python, and the last call ran on a graph."""
    assert outcome.problem is None
    assert outcome.report["fallback"] is None and outcome.ended_on_graph, outcome.report


# A bounded, fixed-seed share of what `make fuzz` does, in chunks so that a
# failure names its chunk (re-run one with -k).
BATCH_SEED, CHUNKS, PROGRAMS_PER_CHUNK = 2026, 4, 25
# Of the calls after profiling, the share graphs serve over the 100 programs (and
# of the programs, those whose last call ran on a graph), measured on the
# generator's mix: a floor a little under what the runner reaches (84% of calls,
# 92% of programs). Programs that fall back count too.
CALL_SHARE_FLOOR, PROGRAM_SHARE_FLOOR = 0.80, 0.85
# The float64 programs among them (programs.FLOAT64_SHARE: 19 of the 100), their calls
# after profiling on graphs: 86% measured; before their stand-in zeros, counters and
# predicates took the model's dtype, most stopped on MXNet's type checks.
FLOAT64_PROGRAMS_FLOOR, FLOAT64_CALL_SHARE_FLOOR = 10, 0.75


@pytest.fixture(scope="module")
def batch():
    """{chunk: [(program seed, call seed, Outcome)]}, every program checked once."""
    outcomes = {}
    for chunk in range(CHUNKS):
        rng = random.Random(BATCH_SEED * 100 + chunk)
        cases = [differential.random_case(rng) for _ in range(PROGRAMS_PER_CHUNK)]
        outcomes[chunk] = [(program_seed, call_seed,
                            differential.check(programs.generate(program_seed), call_seed))
                           for program_seed, call_seed in cases]
    return outcomes


@pytest.mark.long
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_generated_programs_agree_with_imperative(batch, chunk):
    problems = ["program %d, calls %d: %s" % (program_seed, call_seed, outcome.problem)
                for program_seed, call_seed, outcome in batch[chunk] if outcome.problem]
    assert not problems, "\n".join(problems)


@pytest.mark.long
def test_graphs_serve_at_least_the_floor_of_generated_calls(batch, capsys):
    coverage = differential.Coverage()
    for outcomes in batch.values():
        for _, _, outcome in outcomes:
            coverage.add(outcome)
    with capsys.disabled():
        print("\ngenerated programs, %d calls each: %s" % (differential.CALLS, coverage.summary()))
    assert coverage.programs == CHUNKS * PROGRAMS_PER_CHUNK
    assert coverage.call_share >= CALL_SHARE_FLOOR, coverage.summary()
    assert coverage.program_share >= PROGRAM_SHARE_FLOOR, coverage.summary()
    assert coverage.float64.programs >= FLOAT64_PROGRAMS_FLOOR, coverage.summary()
    assert coverage.float64.call_share >= FLOAT64_CALL_SHARE_FLOOR, coverage.summary()


# With hybridize's defaults (three profiled calls, the speed check on) and more
# calls, as a user runs a block: results must still agree. How many calls graphs
# serve here depends on timing (the speed check), so it is printed, not asserted.
DEFAULTS_SEED, DEFAULTS_PROGRAMS, DEFAULTS_CALLS = 77, 12, 20


@pytest.mark.long
def test_generated_programs_agree_with_hybridize_defaults_over_many_calls(monkeypatch, capsys):
    monkeypatch.setattr(speed_check, "ENABLED_BY_DEFAULT", True)
    rng = random.Random(DEFAULTS_SEED)
    coverage, problems = differential.Coverage(), []
    for _ in range(DEFAULTS_PROGRAMS):
        program_seed, call_seed = differential.random_case(rng)
        outcome = differential.check(programs.generate(program_seed), call_seed,
                                     calls=DEFAULTS_CALLS, options={})
        coverage.add(outcome)
        if outcome.problem:
            problems.append("program %d, calls %d: %s" % (program_seed, call_seed,
                                                          outcome.problem))
    assert not problems, "\n".join(problems)
    with capsys.disabled():
        print("\nhybridize defaults, %d calls per program: %s"
              % (DEFAULTS_CALLS, coverage.summary()))


# The graph-break family: Blocks with host reads (`.asscalar()` for a metric or a
# Python `if`) in the middle of graph code, half of them also keeping the rows a
# data-dependent mask selects (boolean_mask); the forward runs as graph segments
# around the reads. A call counts as on graphs when every segment that ran was a
# graph's and one ran (served.py): 73% of calls after profiling on the 16 programs
# of seed 99, where a part returning in a break before any segment ran is Python.
BREAKS_SEED, BREAKS_PROGRAMS, BREAKS_FLOOR = 99, 16, 0.70


@pytest.mark.long
def test_programs_with_host_reads_agree_and_run_on_graph_segments(capsys):
    rng = random.Random(BREAKS_SEED)
    coverage, problems = differential.Coverage(), []
    for _ in range(BREAKS_PROGRAMS):
        program_seed, call_seed = differential.random_case(rng)
        outcome = differential.check(programs.generate(program_seed, breaks=True), call_seed)
        coverage.add(outcome)
        if outcome.problem:
            problems.append("program %d (breaks), calls %d: %s" % (program_seed, call_seed,
                                                                   outcome.problem))
    assert not problems, "\n".join(problems)
    with capsys.disabled():
        print("\ngenerated programs with host reads: %s" % coverage.summary())
    assert coverage.call_share >= BREAKS_FLOOR, coverage.summary()
