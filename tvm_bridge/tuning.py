"""Optional meta-schedule tuning with a budget, persisted for compile_module to use.

Records go to this module's JSON database in the cache (see cache.tuning_dir);
a later run, in any process, skips tuning when the trials or seconds it asks
for were already spent on this module (or its search space is used up). compile_module applies the records.
"""
import inspect
import itertools
import json
import logging
import os
import sys
import tempfile
import time

import tvm
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.analysis import estimate_tir_flops
from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock
from tvm.support.tar import tar

from . import cache
from .compiler import default_rules, fuse
from .target import host_target, target_json
from .tuning_baseline import commit_default_schedules

# Without a trial count a time budget alone bounds the run.
TRIALS_WITHOUT_LIMIT = 100_000
STATE_FILE = "tuning_state.json"
META_SCHEDULE_LOGGER = "tvm.s_tir.meta_schedule"


def import_tensor_intrinsics_quickly():
    """Import tvm.s_tir.tensor_intrin (meta-schedule needs it) in seconds, not a minute.

    Each of its ~250 TVMScript functions calls inspect.stack(); for frames of frozen
    importlib modules, which have no file to cache, inspect.getmodule rescans all of
    sys.modules every time. Telling inspect which module each "<frozen NAME>" is
    makes the import ~6x faster (43 s -> 7 s here).
    """
    for name, module in list(sys.modules.items()):
        if getattr(getattr(module, "__spec__", None), "origin", None) == "frozen":
            pseudo_file = os.path.normcase(os.path.abspath(f"<frozen {name}>"))
            inspect.modulesbyfile.setdefault(pseudo_file, name)
    import tvm.s_tir.tensor_intrin  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import


@derived_object
class InProcessBuilder(ms.builder.PyBuilder):
    """Builds candidates in this process. meta-schedule's LocalBuilder starts a new
    worker pool for every batch and each worker imports the tensor intrinsics
    first (20-90 s per batch on 2 cores) to compile kernels that take ~0.1 s."""

    def build(self, build_inputs):
        return [self._build_one(build_input) for build_input in build_inputs]

    @staticmethod
    def _build_one(build_input):
        try:
            mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(build_input.mod)
            library = tvm.compile(mod, target=build_input.target)
            artifact = os.path.join(tempfile.mkdtemp(prefix="gluon_dyn_tune_"),
                                    "candidate." + tar.output_format)
            library.export_library(artifact, fcompile=tar)
            return ms.builder.BuilderResult(artifact, None)
        except Exception as error:  # pylint: disable=broad-except
            # A candidate that does not build is a failed trial, not a failed tuning run.
            return ms.builder.BuilderResult(None, f"{type(error).__name__}: {error}")


@derived_object
class Progress(ms.measure_callback.PyMeasureCallback):
    """Counts measured trials and prints done/total and elapsed seconds to stderr."""

    def __init__(self, total_trials, stream):
        self.total_trials = total_trials
        self.stream = stream
        self.trials = 0
        self.started = time.monotonic()

    def apply(self, task_scheduler, task_id, measure_candidates, builder_results,
              runner_results):
        self.trials += len(runner_results)
        if self.stream is None:
            return
        elapsed = time.monotonic() - self.started
        total = "?" if self.total_trials >= TRIALS_WITHOUT_LIMIT else self.total_trials
        self.stream.write(f"\r[tvm tuning] {self.trials}/{total} trials, {elapsed:.0f} s")
        self.stream.flush()


def tune_module(mod, target=None, *, trials=None, seconds=None, cache_dir=None,
                trials_per_round=16, progress=True):
    """Tune the kernels of mod["main"] with meta-schedule until it has `trials`
    measurements (earlier runs' included) and/or for `seconds` (checked between
    rounds of `trials_per_round`; the first round always runs, after ~10 s of setup).
    A module's first run records its default schedules first (tuning_baseline.py).

    Returns a dict: skipped (earlier runs spent this budget), trials (run now),
    seconds (spent now), tasks, database (its directory).
    """
    if trials is None and seconds is None:
        raise ValueError("give a tuning budget: trials, seconds or both")
    if (trials is not None and trials < 1) or (seconds is not None and seconds <= 0):
        raise ValueError(f"the tuning budget must be positive, got trials={trials}, "
                         f"seconds={seconds}")
    target = target or host_target()
    directory = cache.tuning_dir(cache.cache_root(cache_dir), cache.module_digest(mod),
                                 target_json(target))
    os.makedirs(directory, exist_ok=True)
    done = _read_state(directory)
    if _covered(done, trials, seconds):
        return {"skipped": True, "trials": 0, "seconds": 0.0, "tasks": 0, "database": directory}

    started = time.monotonic()
    deadline = None if seconds is None else started + seconds
    _quiet_console_log()
    import_tensor_intrinsics_quickly()
    cost_model, strategy = _search_method()
    tasks, weights = _tune_contexts(fuse(mod, target), target, directory, strategy)
    total = trials - done["trials"] if trials else TRIALS_WITHOUT_LIMIT
    counter = Progress(total, sys.stderr if progress else None)
    shared = {"work_dir": directory, "builder": InProcessBuilder(),
              "runner": ms.runner.LocalRunner(), "cost_model": cost_model,
              "database": ms.database.JSONDatabase(work_dir=directory),
              "measure_callbacks": [*ms.measure_callback.MeasureCallback.create("default"),
                                    counter]}
    if done["trials"] == 0:
        commit_default_schedules(tasks, target, default_rules(), shared["database"],
                                 shared["builder"], shared["runner"])
    # One task per round, in turn: meta-schedule's schedulers can only stop at their
    # trial limit (ending a task from a callback breaks their invariants), so the
    # clock is checked between rounds.
    rounds_without_trials = 0
    exhausted = False
    for round_index in itertools.count():
        out_of_time = deadline is not None and time.monotonic() >= deadline
        if counter.trials >= total or (out_of_time and round_index > 0):
            break
        if rounds_without_trials == len(tasks):
            exhausted = True  # every task's search space is used up
            break
        task = round_index % len(tasks)
        before = counter.trials
        batch = min(trials_per_round, total - counter.trials)
        ms.tune.tune_tasks(tasks=[tasks[task]], task_weights=[weights[task]],
                           max_trials_global=batch, num_trials_per_iter=batch, **shared)
        rounds_without_trials = 0 if counter.trials > before else rounds_without_trials + 1
    if progress:
        sys.stderr.write("\n")
    spent = time.monotonic() - started
    _write_state(directory, {"trials": done["trials"] + counter.trials,
                             "seconds": done["seconds"] + spent, "exhausted": exhausted})
    return {"skipped": False, "trials": counter.trials, "seconds": spent,
            "tasks": len(tasks), "database": directory}


def _quiet_console_log():
    """meta-schedule prints every step to stdout unless its logger has a level of
    its own; keep warnings there (its log files in the database folder keep all)."""
    logger = logging.getLogger(META_SCHEDULE_LOGGER)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.WARNING)


def _tune_contexts(fused, target, directory, strategy):
    # Rounds visit tasks in this order: the costliest kernels first, so a small
    # budget goes to the matmuls rather than to dozens of slices.
    extracted = sorted(ms.relax_integration.extract_tasks(fused, target),
                       key=lambda task: -task.weight * estimate_tir_flops(task.dispatched[0]))
    tasks, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
        extracted, work_dir=directory, strategy=strategy)
    if not tasks:
        raise ValueError("the module has no kernels meta-schedule can tune")
    return tasks, weights


def _search_method():
    """(cost model, search strategy): evolutionary search guided by XGBoost when it
    is installed (it is not a dependency); else random sampling of schedules, since
    evolving candidates ranked by a random model only costs time (20+ s a batch)."""
    try:
        import xgboost  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    except ImportError:
        return "random", "replay-trace"
    return "xgb", "evolutionary"


def _read_state(directory):
    """Trials and seconds spent on this module so far, and whether its search ended."""
    path = os.path.join(directory, STATE_FILE)
    if not os.path.exists(path):
        return {"trials": 0, "seconds": 0.0, "exhausted": False}
    with open(path) as f:
        return json.load(f)


def _write_state(directory, state):
    with open(os.path.join(directory, STATE_FILE), "w") as f:
        json.dump(state, f)


def _covered(done, trials, seconds):
    if done["exhausted"]:
        return True
    return ((trials is not None and done["trials"] >= trials)
            or (seconds is not None and done["seconds"] >= seconds))
