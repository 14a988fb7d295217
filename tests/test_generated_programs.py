"""The program generator behind `make fuzz` (tests/fuzzing/): programs are valid Python,
reproducible from a seed, and shrink to smaller valid programs."""
from fuzzing import differential, programs


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
