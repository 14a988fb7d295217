"""The suite as several pytest processes, two at a time, closed by one pytest-style line.

One pytest process for the whole suite grew to 10 GB resident: much of what a
file's tests free is not given back to the system (native allocations of MXNet and
TVM, libraries loaded), so a fresh process per group of files returns it when the
group ends. Two groups run at once (2 cores; much of a test is one Python thread).
A file with a test marked `long` (pytest.ini) is a group of its own, started
first, so that the long ones overlap the rest instead of ending the run alone.

Each group's output is printed whole when it ends; the closing line counts every
group's tests as pytest's own does, with the wall time and the largest resident
memory of a group (two run at once: the sum of the two largest bounds the peak).
Compiled TVM libraries go to one cache for the run, shared by every group
(conftest.py: tests that name no cache directory use it).

    python tests/run_suite.py [pytest options]      e.g. -m "not long"
Exit status 0 when every group passed (or selected no test), 1 otherwise.
"""
import collections
import datetime
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

TESTS = os.path.dirname(os.path.abspath(__file__))
WORKERS = 2
FILES_PER_GROUP = 8     # a process costs ~4 CPU-seconds of imports
NO_TESTS_COLLECTED = 5  # pytest's exit status when a -m or -k selects nothing in a group
# Words of pytest's closing line, in its order.
OUTCOMES = ("failed", "passed", "skipped", "deselected", "xfailed", "xpassed", "warnings",
            "errors")
COUNT = re.compile(r"(\d+) (failed|passed|skipped|deselected|xfailed|xpassed|warnings?|errors?)")


def suite_files():
    """The suite's test files, by name."""
    return sorted(name for name in os.listdir(TESTS)
                  if name.startswith("test_") and name.endswith(".py"))


def holds_long_tests(name):
    """Whether the file marks a test `long`."""
    with open(os.path.join(TESTS, name)) as f:
        return "mark.long" in f.read()


def groups(files):
    """Files with long tests alone, first; the others in runs of FILES_PER_GROUP."""
    long_files = [[name] for name in files if holds_long_tests(name)]
    rest = [name for name in files if not holds_long_tests(name)]
    return long_files + [rest[k:k + FILES_PER_GROUP]
                         for k in range(0, len(rest), FILES_PER_GROUP)]


def counts(output):
    """{outcome: n} from a pytest output's closing line."""
    lines = [line for line in output.splitlines() if re.search(r"\d+ \w+.* in [\d.]+s", line)]
    found = collections.Counter()
    for number, word in COUNT.findall(lines[-1] if lines else ""):
        found[{"warning": "warnings", "error": "errors"}.get(word, word)] += int(number)
    return found


def run_group(files, options, env):
    """(exit status, output, peak resident MB) of pytest over `files`."""
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *options,
         *[os.path.join("tests", name) for name in files]],
        cwd=os.path.dirname(TESTS), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode, output, usage.ru_maxrss / 1024


def main(options):
    """Run every group, print each one's output and the closing line; the exit status."""
    start = time.time()
    pending = groups(suite_files())
    totals, failed, peaks = collections.Counter(), [], []
    lock = threading.Lock()
    with tempfile.TemporaryDirectory(prefix="gluon_dyn_tvm_cache_") as cache:
        env = dict(os.environ, GLUON_DYN_TVM_CACHE=os.environ.get("GLUON_DYN_TVM_CACHE", cache))

        def worker():
            while True:
                with lock:
                    if not pending:
                        return
                    files = pending.pop(0)
                status, output, peak_mb = run_group(files, options, env)
                found = counts(output)
                with lock:
                    print("\n##### %s: exit %d, %.0f MB\n%s" % (" ".join(files), status,
                                                                peak_mb, output), flush=True)
                    totals.update(found)
                    peaks.append(peak_mb)
                    if status not in (0, NO_TESTS_COLLECTED):
                        failed.append(" ".join(files))
                        if not (found["failed"] or found["errors"]):
                            totals["errors"] += 1     # the process died, or pytest erred

        threads = [threading.Thread(target=worker) for _ in range(WORKERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    seconds = time.time() - start
    for files in failed:
        print("FAILED group: %s" % files)
    peaks.sort()
    summary = ", ".join("%d %s" % (totals[word], word) for word in OUTCOMES if totals[word])
    print("%s %s in %.2fs (%s); largest group %.0f MB resident, two largest %.0f MB %s"
          % ("=" * 10, summary or "no tests ran", seconds,
             datetime.timedelta(seconds=round(seconds)), peaks[-1] if peaks else 0,
             sum(peaks[-2:]), "=" * 10), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
