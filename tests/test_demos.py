"""`make demo`'s scripts run to the end on a fresh process and say what they show."""
import os
import subprocess
import sys

import pytest

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


@pytest.mark.parametrize("script, last_words", [
    ("demo.py", "demo finished"),
    ("dynamic_demo.py", "last call on a graph: True"),
])
def test_demo_runs_to_its_end(tmp_path, script, last_words):
    done = subprocess.run([sys.executable, os.path.join(EXAMPLES, script)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert last_words in done.stdout, done.stdout[-2000:]
