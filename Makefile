# `make test` and `make demo` set everything up from nothing: .venv, pinned
# dependencies, the editable install and the C++ operator library. Each step is
# a file target, so re-running does no work that is already done.
PYTHON_BOOTSTRAP ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
MX_DIR = $(shell $(PY) -c "import os, mxnet; print(os.path.dirname(mxnet.__file__))" 2>/dev/null)
NATIVE_SRC := $(wildcard src/operator/control_flow/*.cc) $(wildcard src/operator/control_flow/*.h)
NATIVE_LIB := gluon_dyn/_lib/libgluon_dyn_ops.so
CXXFLAGS ?= -O2 -std=c++17 -fPIC -Wall
# The library binds to its own copy of lib_api.cc's classes: libmxnet.so exports
# the same names built with the old C++ ABI, and once a library loaded with
# RTLD_GLOBAL (Horovod's) puts libmxnet.so in the global scope, lazy binding
# would otherwise pick those (a crash, "free(): invalid pointer").
NATIVE_LDFLAGS := -Wl,-Bsymbolic

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

.PHONY: setup test demo native clean

setup: $(STAMP) $(NATIVE_LIB) $(HOROVOD_STAMP)

$(PY):
	$(PYTHON_BOOTSTRAP) -m venv $(VENV)

$(STAMP): $(PY) requirements.txt setup.py
	$(PY) -m pip install -q wheel -r requirements.txt
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $(STAMP)

$(HOROVOD_STAMP): $(STAMP)
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

native: $(NATIVE_LIB)

$(NATIVE_LIB): $(STAMP) $(NATIVE_SRC) Makefile
	mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -shared $(NATIVE_LDFLAGS) -I$(MX_DIR)/include \
	    $(filter %.cc,$(NATIVE_SRC)) $(MX_DIR)/src/lib_api.cc -o $@

test: setup
	$(PY) -m pytest tests

demo: setup
	$(PY) examples/demo.py
	$(PY) examples/dynamic_demo.py

clean:
	rm -rf $(VENV) gluon_dyn/_lib build *.egg-info

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
