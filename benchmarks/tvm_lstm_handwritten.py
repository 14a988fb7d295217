"""The hand-built 50-step LSTM (hidden 64, batch 1, weights as inputs) through
tvm_bridge's compiler: untuned (dlight schedules) vs tuned, per TVM thread count.

    .venv/bin/python benchmarks/tvm_lstm_handwritten.py [--trials 64] [--threads 1 2]

Each thread count runs in its own process (TVM reads TVM_NUM_THREADS once).
Untuned and tuned functions are timed interleaved; prints medians in ms.
"""
import argparse
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def measure_here(trials, repeats):
    sys.path.insert(0, REPO)
    sys.path.insert(0, os.path.join(REPO, "tests"))
    # pylint: disable=import-outside-toplevel
    from tvm_bridge import compiler, sample_modules, tuning
    from gluon_dyn import measure
    from tvm_runtime_helpers import random_inputs

    mod = sample_modules.lstm(steps=50, batch=1, in_dim=64, hidden=64)
    untuned = compiler.compile_module(mod, use_tuning=False)
    report = tuning.tune_module(mod, trials=trials)
    tuned = compiler.compile_module(mod)
    inputs = random_inputs(untuned.signature)
    medians = measure.median_time({"untuned": lambda: untuned(*inputs),
                                   "tuned": lambda: tuned(*inputs)}, warmup=20, repeats=repeats)
    print(f"TVM_NUM_THREADS={os.environ['TVM_NUM_THREADS']}: "
          f"untuned {medians['untuned'] * 1e3:.3f} ms (compiled in "
          f"{untuned.info['compile_seconds']:.1f} s{', cached' if untuned.info['from_cache'] else ''}), "
          f"tuned {medians['tuned'] * 1e3:.3f} ms ({report['trials']} trials in "
          f"{report['seconds']:.0f} s{', reused' if report['skipped'] else ''}; compiled in "
          f"{tuned.info['compile_seconds']:.1f} s{', cached' if tuned.info['from_cache'] else ''})",
          flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--here", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.here:
        measure_here(args.trials, args.repeats)
        return
    for threads in args.threads:
        subprocess.run([sys.executable, __file__, "--here", "--trials", str(args.trials),
                        "--repeats", str(args.repeats)], check=True,
                       env={**os.environ, "TVM_NUM_THREADS": str(threads)})


if __name__ == "__main__":
    main()
