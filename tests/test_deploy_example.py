"""examples/deploy: the model trained and exported in Python prints the same numbers from C
(predict.c) and from Java (Main.java, run as `java -cp gluon_dyn.jar:. Main` with nothing set)."""
import os
import shutil
import subprocess
import sys

import pytest

from native_runtime import BUILD, REPO, clean_environment, compile_c

EXAMPLE = os.path.join(REPO, "examples", "deploy")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(directory, Python's printed lines with the language label dropped)."""
    directory = tmp_path_factory.mktemp("deploy")
    done = subprocess.run([sys.executable, os.path.join(EXAMPLE, "train_and_export.py"),
                           str(directory / "model")], capture_output=True, text=True,
                          timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line.split(" ", 1)[1] for line in done.stdout.splitlines()
             if line.startswith("python example")]
    assert len(lines) == 3
    return directory, lines


def labelled(stdout, language):
    return [line.split(" ", 1)[1] for line in stdout.splitlines()
            if line.startswith(language + " example")]


def test_the_c_example_prints_what_python_printed(exported):
    directory, python_lines = exported
    program = compile_c(os.path.join(EXAMPLE, "predict.c"), str(directory / "predict"))
    done = subprocess.run([program, str(directory / "model")], capture_output=True, text=True,
                          timeout=300, env=clean_environment())
    assert done.returncode == 0, done.stderr
    assert labelled(done.stdout, "c") == python_lines


@pytest.mark.skipif(shutil.which("javac") is None,
                    reason="javac not found: the Java binding is not built")
def test_the_java_example_prints_what_python_printed(exported):
    directory, python_lines = exported
    shutil.copy(os.path.join(BUILD, "gluon_dyn.jar"), directory / "gluon_dyn.jar")
    subprocess.run(["javac", "-cp", "gluon_dyn.jar", "-d", ".", os.path.join(EXAMPLE, "Main.java")],
                   check=True, cwd=str(directory))
    done = subprocess.run(["java", "-cp", "gluon_dyn.jar:.", "Main", "model"], capture_output=True,
                          text=True, timeout=300, cwd=str(directory), env=clean_environment())
    assert done.returncode == 0, done.stderr
    assert labelled(done.stdout, "java") == python_lines
