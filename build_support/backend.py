"""The package's build backend: setuptools', with the build requirements completed
from pyproject.toml's own pins.

The C++ operator library compiles against lib_api.h and lib_api.cc from the mxnet
wheel (setup.py), so building a wheel needs mxnet installed, at the version the
package runs with. Instead of repeating that pin in [build-system] requires, the
requirements named in BUILD_WITH are taken from [project] dependencies here.
"""
import pathlib
import re

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib

from setuptools import build_meta
from setuptools.build_meta import *  # noqa: F401,F403  (the other PEP 517 hooks, unchanged)

# mxnet for its headers; numpy so that pip installs the pinned one beside it, not the newest.
BUILD_WITH = ("mxnet", "numpy")


def pinned_build_requirements():
    """The [project] dependencies of the packages in BUILD_WITH, as written there."""
    dependencies = tomllib.loads(pathlib.Path("pyproject.toml").read_text())["project"][
        "dependencies"]
    found = {re.match(r"[A-Za-z0-9_.-]+", requirement).group().lower(): requirement
             for requirement in dependencies}
    missing = [name for name in BUILD_WITH if name not in found]
    if missing:
        raise RuntimeError("pyproject.toml's [project] dependencies lack %s, which the build "
                           "needs" % ", ".join(missing))
    return [found[name] for name in BUILD_WITH]


def get_requires_for_build_wheel(config_settings=None):
    return build_meta.get_requires_for_build_wheel(config_settings) + pinned_build_requirements()


def get_requires_for_build_editable(config_settings=None):
    return (build_meta.get_requires_for_build_editable(config_settings)
            + pinned_build_requirements())
