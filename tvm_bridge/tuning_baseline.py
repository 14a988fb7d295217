"""Tuning never makes a kernel slower than tvm_bridge's own schedule of it.

meta-schedule keeps the fastest candidate it measured for each kernel, and
compiler.py applies that record ahead of the dlight rules: a small budget of
random candidates replaced our register-tiled schedules with slower ones (LeNet at
batch 64 after 48 trials: its second convolution 0.85 -> 2.7 ms, its first
0.21 -> 1.5, the dense layer 0.26 -> 0.53). Before the first tuning round, each
kernel's default schedule is measured with the same builder and runner and
committed as a record of its own, so a tuned schedule is applied only where it
measured faster.
"""
from tvm.s_tir import meta_schedule as ms


def commit_default_schedules(contexts, target, rules, database, builder, runner):
    """Measure and record the schedule the first of `rules` taking each task's
    kernel gives it (tasks no rule takes are left to tuning alone); returns how
    many were recorded."""
    recorded = 0
    for context in contexts:
        kernel = context.mod["main"]
        schedule = next((s for s in (rule.apply(kernel, target, False) for rule in rules)
                         if s is not None), None)
        if schedule is None:
            continue
        args_info = ms.arg_info.ArgInfo.from_prim_func(kernel)
        (built,) = builder.build([ms.builder.BuilderInput(schedule.mod, target)])
        if built.error_msg:
            continue
        # tvm_bridge compiles for the host CPU ("llvm"), whose device is "cpu".
        (future,) = runner.run([ms.runner.RunnerInput(built.artifact_path, "cpu", args_info)])
        measured = future.result()
        if measured.error_msg:
            continue
        database.commit_tuning_record(ms.database.TuningRecord(
            schedule.trace, database.commit_workload(context.mod), measured.run_secs, target,
            args_info))
        recorded += 1
    return recorded
