# `make test` and `make demo` set everything up from nothing: .venv, then this
# tree installed into it by pip (editable) with the pins of pyproject.toml, which
# builds the C++ operator library into gluon_dyn/_lib/ (setup.py), exactly as
# `pip install .` does for users. The install is a file target (the library), so
# re-running does no work that is already done.
PYTHON_BOOTSTRAP ?= python3
VENV := .venv
PY := $(VENV)/bin/python
NATIVE_LIB := gluon_dyn/_lib/libgluon_dyn_ops.so
PACKAGING := pyproject.toml setup.py MANIFEST.in build_support/backend.py
NATIVE_SRC := $(wildcard src/operator/control_flow/*.cc src/operator/control_flow/*.h) \
    src/ndarray/version.cc

# Horovod (data-parallel training) has no wheel on PyPI: it is built from source
# against the installed mxnet, with Gloo and without MPI (--no-build-isolation,
# so that its build finds mxnet). The wheel is cached outside the checkout,
# keyed by the Python and mxnet versions, so a re-run or a fresh clone on the
# same machine installs it in seconds instead of rebuilding (~5 min on 2 cores).
HOROVOD_VERSION := 0.28.1
WHEEL_CACHE ?= $(HOME)/.cache/gluon_dyn/wheels
HOROVOD_STAMP := $(VENV)/.horovod-$(HOROVOD_VERSION)
HOROVOD_BUILD_ENV := MAKEFLAGS=-j2 HOROVOD_WITH_MXNET=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 \
    HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_CPU_OPERATIONS=gloo

.PHONY: setup test demo clean wheel-test

setup: $(NATIVE_LIB) $(HOROVOD_STAMP)

$(PY):
	$(PYTHON_BOOTSTRAP) -m venv $(VENV)

# pip compiles the library in its own build environment (with the pinned mxnet);
# touch: setuptools leaves an up-to-date library as it was.
$(NATIVE_LIB): $(PY) $(PACKAGING) $(NATIVE_SRC)
	$(PY) -m pip install -q -e '.[tvm,tests,horovod,examples]'
	touch $@

$(HOROVOD_STAMP): $(NATIVE_LIB)
	@key=$$($(PY) -c "import sys, mxnet; print('py%d.%d-mxnet%s' % (*sys.version_info[:2], mxnet.__version__))"); \
	wheels=$(WHEEL_CACHE)/horovod-$(HOROVOD_VERSION)-$$key; \
	if ! ls $$wheels/horovod-$(HOROVOD_VERSION)-*.whl >/dev/null 2>&1; then \
	    command -v cmake >/dev/null || { echo "building Horovod needs cmake (apt-get install cmake)"; exit 1; }; \
	    echo "building Horovod $(HOROVOD_VERSION) with MXNet and Gloo into $$wheels (about 5 minutes)"; \
	    rm -rf $$wheels.partial; \
	    $(HOROVOD_BUILD_ENV) $(PY) -m pip wheel -q --no-deps --no-build-isolation --no-cache-dir \
	        -w $$wheels.partial horovod==$(HOROVOD_VERSION) && rm -rf $$wheels && mv $$wheels.partial $$wheels \
	        || exit 1; \
	fi; \
	$(PY) -m pip install -q --no-deps $$wheels/horovod-$(HOROVOD_VERSION)-*.whl
	touch $@

test: setup wheel-test
	$(PY) -m pytest tests

demo: setup
	$(PY) examples/demo.py
	$(PY) examples/dynamic_demo.py

# A wheel built by `python -m build` (sdist, then the wheel from it) from a clean
# clone of the current commit, installed with its dependencies alone into a fresh
# virtual environment, and smoke-tested there from outside the source tree.
wheel-test: setup
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	git clone -q "$(CURDIR)" "$$tmp/clone" && \
	$(PY) -m build -q --outdir "$$tmp/dist" "$$tmp/clone" && \
	$(PYTHON_BOOTSTRAP) -m venv "$$tmp/venv" && \
	"$$tmp/venv/bin/python" -m pip install -q "$$tmp"/dist/*.whl && \
	cd "$$tmp" && "$$tmp/venv/bin/python" clone/tests/wheel_smoke.py

clean:
	rm -rf $(VENV) gluon_dyn/_lib build dist *.egg-info

# Optional: PyTorch (CPU) for the context columns of the benchmarks; never a
# dependency of gluon_dyn itself.
.PHONY: bench-extra
bench-extra: setup
	$(PY) -m pip install -q torch==2.13.0

# Generated programs, imperative vs hybridize(dynamic=True), for FUZZ_MINUTES minutes
# (random seed; FUZZ_SEED=N to repeat a run). Disagreements go to fuzz-failures/.
FUZZ_MINUTES ?= 5
.PHONY: fuzz
fuzz: setup
	FUZZ_MINUTES=$(FUZZ_MINUTES) $(PY) tests/fuzz.py

# The JANUS workloads (examples/train) imperative vs dynamic vs TVM, and the
# Horovod scale factor: writes docs/benchmarks.md and its plots (~15 minutes).
.PHONY: report
report: setup
	$(PY) benchmarks/training_report.py
