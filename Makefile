# `make test` and `make demo` set everything up from nothing: .venv, pinned
# dependencies, the editable install and the C++ operator library. Each step is
# a file target, so re-running does no work that is already done.
PYTHON_BOOTSTRAP ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
MX_DIR = $(shell $(PY) -c "import os, mxnet; print(os.path.dirname(mxnet.__file__))" 2>/dev/null)
NATIVE_SRC := $(wildcard src/operator/control_flow/*.cc) $(wildcard src/operator/control_flow/*.h) \
    src/ndarray/version.cc
# src/ndarray/ reads MXNet's NDArray through its C++ header, whose layout depends on
# how the wheel was built (oneDNN); mshadow must not look for a cblas.h.
MX_MKLDNN = $(shell $(PY) -c "import mxnet; print(int(mxnet.runtime.Features().is_enabled('MKLDNN')))" 2>/dev/null)
NDARRAY_FLAGS = -I$(MX_DIR)/include/mkldnn -DMXNET_USE_MKLDNN=$(MX_MKLDNN) -DMSHADOW_USE_CBLAS=0 \
    -DMSHADOW_USE_MKL=0 -DMSHADOW_USE_CUDA=0 -DDMLC_USE_CXX11=1
NATIVE_LIB := gluon_dyn/_lib/libgluon_dyn_ops.so
CXXFLAGS ?= -O2 -std=c++17 -fPIC -Wall

.PHONY: setup test demo native clean

setup: $(STAMP) $(NATIVE_LIB)

$(PY):
	$(PYTHON_BOOTSTRAP) -m venv $(VENV)

$(STAMP): $(PY) requirements.txt setup.py
	$(PY) -m pip install -q wheel -r requirements.txt
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $(STAMP)

native: $(NATIVE_LIB)

$(NATIVE_LIB): $(STAMP) $(NATIVE_SRC)
	mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -shared -I$(MX_DIR)/include $(NDARRAY_FLAGS) \
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
