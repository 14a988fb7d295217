"""A tiny meta-schedule run, its database reused by another process."""
import pytest

from tvm_bridge import cache, compiler, sample_modules, tuning
from tvm_runtime_helpers import assert_matches, mlp_reference, random_inputs, run_python

SECOND_PROCESS = """
from tvm_bridge import compiler, sample_modules, tuning
report = tuning.tune_module(sample_modules.mlp(), trials=4)
fn = compiler.compile_module(sample_modules.mlp())
print(report["skipped"], fn.info["tuned"], fn.info["from_cache"])
"""


def test_tuning_within_a_few_trials_is_applied_and_reused(tmp_path, capsys):
    mod = sample_modules.mlp()
    report = tuning.tune_module(mod, trials=4, seconds=60, cache_dir=str(tmp_path))
    assert not report["skipped"] and 1 <= report["trials"] <= 4
    assert "[tvm tuning] 4/4 trials" in capsys.readouterr().err
    tuned = compiler.compile_module(mod, cache_dir=str(tmp_path))
    assert tuned.info["tuned"] and not tuned.info["from_cache"]
    inputs = random_inputs(tuned.signature)
    assert_matches(tuned(*inputs), mlp_reference(*[a.asnumpy() for a in inputs]))
    # A smaller budget is covered by the run above: skipped, in another process too.
    assert tuning.tune_module(mod, trials=2, seconds=30, cache_dir=str(tmp_path))["skipped"]
    report = run_python(SECOND_PROCESS, env={cache.CACHE_ENV: str(tmp_path)})
    assert report.split() == ["True", "True", "True"]


def test_a_budget_is_required(tmp_path):
    with pytest.raises(ValueError, match="give a tuning budget"):
        tuning.tune_module(sample_modules.mlp(), cache_dir=str(tmp_path))
