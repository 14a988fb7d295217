"""run_suite.py, which `make test` runs: every group's tests counted in one closing
line, a failing group failing the run, a group that a mark empties not failing it,
and files holding `long` tests run as groups of their own."""
import run_suite

PASSING = "def test_one():\n    assert True\n\ndef test_two():\n    assert True\n"
FAILING = "import pytest\n\n@pytest.mark.long\ndef test_three():\n    assert False\n"


def suite(tmp_path, monkeypatch, files):
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    long: a long run\n")
    tests = tmp_path / "tests"
    tests.mkdir()
    for name, text in files.items():
        (tests / name).write_text(text)
    monkeypatch.setattr(run_suite, "TESTS", str(tests))


def test_the_closing_line_counts_every_group_and_a_failure_fails_the_run(
        tmp_path, monkeypatch, capsys):
    suite(tmp_path, monkeypatch, {"test_a.py": PASSING, "test_b.py": FAILING})
    assert run_suite.groups(run_suite.suite_files()) == [["test_b.py"], ["test_a.py"]]
    assert run_suite.main([]) == 1
    closing = capsys.readouterr().out.splitlines()[-1]
    assert "1 failed, 2 passed in " in closing, closing


def test_a_group_whose_tests_are_all_deselected_does_not_fail_the_run(
        tmp_path, monkeypatch, capsys):
    suite(tmp_path, monkeypatch, {"test_a.py": PASSING, "test_b.py": FAILING})
    assert run_suite.main(["-m", "not long"]) == 0
    closing = capsys.readouterr().out.splitlines()[-1]
    assert "2 passed, 1 deselected in " in closing, closing
