"""The compile cache across processes, compile errors, and the timing helper."""
import pytest
from tvm import relax

from gluon_dyn import measure
from tvm_bridge import cache, compiler, sample_modules
from tvm_runtime_helpers import run_python

SECOND_PROCESS = """
from tvm_bridge import compiler, sample_modules
from tvm_runtime_helpers import assert_matches, mlp_reference, random_inputs
fn = compiler.compile_module(sample_modules.mlp(batch="batch"))
inputs = random_inputs(fn.signature, {"batch": 2})
assert_matches(fn(*inputs), mlp_reference(*[a.asnumpy() for a in inputs]))
print(fn.info["from_cache"], fn.info["compile_seconds"])
"""


def test_a_second_process_loads_the_cached_library_without_compiling(tmp_path):
    first = compiler.compile_module(sample_modules.mlp(batch="batch"), cache_dir=str(tmp_path))
    assert first.info["from_cache"] is False and first.info["compile_seconds"] > 0
    report = run_python(SECOND_PROCESS, env={cache.CACHE_ENV: str(tmp_path),
                                             "PYTHONPATH": "tests"})
    assert report.split() == ["True", "0.0"]


def test_another_module_or_no_cache_compiles_again(tmp_path):
    compiler.compile_module(sample_modules.mlp(), cache_dir=str(tmp_path))
    other = compiler.compile_module(sample_modules.mlp(hidden=16), cache_dir=str(tmp_path))
    uncached = compiler.compile_module(sample_modules.mlp(), cache_dir=str(tmp_path),
                                       use_cache=False)
    assert not other.info["from_cache"] and not uncached.info["from_cache"]
    assert uncached.info["library"] is None


def test_a_module_without_main_is_refused():
    with pytest.raises(ValueError, match="no function 'main'"):
        compiler.compile_module(relax.BlockBuilder().get(), use_cache=False)


def test_median_time_interleaves_variants(monkeypatch):
    """Each call advances a fake clock by its own duration (a warm-up call's first):
    the result is the median of the timed calls alone."""
    clock, calls = [0.0], []
    durations = {"a": iter([9.0, 1.0, 2.0, 30.0]), "b": iter([9.0, 40.0, 4.0, 5.0])}
    monkeypatch.setattr(measure.time, "perf_counter", lambda: clock[0])

    def variant(name):
        def run():
            calls.append(name)
            clock[0] += next(durations[name])
        return run

    medians = measure.median_time({"a": variant("a"), "b": variant("b")}, warmup=1, repeats=3)
    assert calls == ["a", "b"] * 4
    assert medians == {"a": 2.0, "b": 5.0}
    with pytest.raises(ValueError, match="repeats >= 1"):
        measure.median_time([lambda: None], repeats=0)
