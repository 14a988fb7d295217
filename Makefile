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
    src/ndarray/version.cc src/ndarray/call_description.cc src/ndarray/dlpack_exchange.cc src/engine/serial_regions.cc

# Horovod (data-parallel training) has no wheel on PyPI: it is built from source
# against the installed mxnet, with Gloo and without MPI (--no-build-isolation,
# so that its build finds mxnet). The wheel is cached outside the checkout,
# keyed by the Python and mxnet versions, so a re-run or a fresh clone on the
# same machine installs it in seconds instead of rebuilding (~5 min on 2 cores).
HOROVOD_VERSION := 0.28.1
WHEEL_CACHE ?= $(HOME)/.cache/gluon_dyn/wheels
HOROVOD_STAMP := $(VENV)/.horovod-$(HOROVOD_VERSION)
# PyTorch, for the benchmarks' PyTorch columns and the tests of their PyTorch worker
# (benchmarks/torch_worker.py), is never a dependency of gluon_dyn: it lives in a
# folder of its own that only that worker process puts on its path. In the venv's
# packages it would break GluonCV 0.10, which refuses to import beside torch>=2.
# pip takes the CPU build (2.13.0+cpu) where its find-links offer one, as here.
TORCH_VERSION := 2.13.0
TORCH_DIR := $(VENV)/torch-packages
TORCH_STAMP := $(TORCH_DIR)/.torch-$(TORCH_VERSION)
HOROVOD_BUILD_ENV := MAKEFLAGS=-j2 HOROVOD_WITH_MXNET=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 \
    HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_CPU_OPERATIONS=gloo

# d2l (tests/corpus) without its dependencies: it pins pandas, requests, scipy,
# matplotlib and jupyter at versions that conflict with ours; the corpus extra of
# pyproject.toml installs what d2l.mxnet imports.
D2L_VERSION := 1.0.3
D2L_STAMP := $(VENV)/.d2l-$(D2L_VERSION)

# Native deployment (below): the C runtime, and the Java binding where a JDK exists.
.PHONY: setup test test-fast demo clean wheel-test

setup: $(NATIVE_LIB) $(HOROVOD_STAMP) $(TORCH_STAMP) $(D2L_STAMP) runtime java

$(PY):
	$(PYTHON_BOOTSTRAP) -m venv $(VENV)

# pip compiles the library in its own build environment (with the pinned mxnet);
# touch: setuptools leaves an up-to-date library as it was.
$(NATIVE_LIB): $(PY) $(PACKAGING) $(NATIVE_SRC)
	$(PY) -m pip install -q -e '.[tvm,tests,horovod,examples,corpus,docs]'
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

$(D2L_STAMP): $(NATIVE_LIB)
	$(PY) -m pip install -q --no-deps d2l==$(D2L_VERSION)
	touch $@

$(TORCH_STAMP): $(PY)
	rm -rf $(TORCH_DIR) && $(PY) -m pip install -q --target $(TORCH_DIR) torch==$(TORCH_VERSION)
	touch $@

# The suite, then TEST_FUZZ_MINUTES of generated programs on a fresh seed (`make fuzz`,
# below): every change meets programs no fixed seed holds. 2 minutes are about 20
# programs, so a bug that 2 programs in 34 hit fails 7 runs in 10; more would
# lengthen every run of the suite, whose own 100 fixed programs
# (tests/test_generated_programs.py) already take about 6 CPU-minutes.
TEST_FUZZ_MINUTES ?= 2
# The suite runs as groups of test files in fresh pytest processes, two at a time
# (tests/run_suite.py): one process for all of it grew past 8 GB. Its closing line
# counts every group's tests, as pytest's does.
SUITE := $(PY) tests/run_suite.py

test: setup wheel-test
	$(SUITE)
	$(MAKE) --no-print-directory docs
	$(MAKE) --no-print-directory fuzz FUZZ_MINUTES=$(TEST_FUZZ_MINUTES)

# A developer's loop (under 5 minutes): the suite without the tests marked `long`
# (pytest.ini), set up from nothing as `make test` is; no wheel, docs or fuzzing.
test-fast: setup
	$(SUITE) -m "not long"

demo: setup
	$(PY) examples/demo.py
	$(PY) examples/dynamic_demo.py
	$(MAKE) --no-print-directory deploy-demo

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

# The C runtime (build/libgluon_dyn_runtime.so, header src/runtime/gluon_dyn_runtime.h), linked
# against the tvm wheel's libtvm_ffi.so by absolute rpath; it loads libmxnet.so, TVM's runtime
# and the operator library from the absolute paths compiled in: programs need no environment.
RUNTIME_SRC := $(wildcard src/runtime/*.cc) $(wildcard src/runtime/*.h) src/runtime/exports.map
RUNTIME_LIB := build/libgluon_dyn_runtime.so
RUNTIME_CXXFLAGS := -O2 -std=c++17 -fPIC -Wall
package_dir = $(shell $(PY) -c "import importlib.util as u; print(u.find_spec('$(1)').submodule_search_locations[0])")

.PHONY: runtime java
runtime: $(RUNTIME_LIB)

$(RUNTIME_LIB): $(NATIVE_LIB) $(RUNTIME_SRC)
	mkdir -p $(dir $@)
	MX=$(call package_dir,mxnet); TVM=$(call package_dir,tvm); FFI=$(call package_dir,tvm_ffi); \
	$(CXX) $(RUNTIME_CXXFLAGS) -shared -I$$FFI/include -I$$MX/include \
	    -DGD_MXNET_LIBRARY="\"$$MX/libmxnet.so\"" \
	    -DGD_OPERATOR_LIBRARY='"$(abspath $(NATIVE_LIB))"' \
	    -DGD_TVM_RUNTIME_LIBRARY="\"$$TVM/lib/libtvm_runtime.so\"" \
	    -DGD_TVM_FFI_LIBRARY="\"$$FFI/lib/libtvm_ffi.so\"" \
	    $(filter %.cc,$(RUNTIME_SRC)) -o $@ \
	    -Wl,--version-script=src/runtime/exports.map -Wl,--no-undefined \
	    -L$$FFI/lib -ltvm_ffi -ldl -Wl,-rpath,$$FFI/lib

# The Java binding (build/gluon_dyn.jar: package gluondyn, its JNI library inside and beside
# it). Machines without a JDK skip it, saying so; its tests skip too.
JAVAC := $(shell command -v javac 2>/dev/null)
JAVA_SRC := $(wildcard src/java/gluondyn/*.java)
JNI_LIB := build/libgluon_dyn_jni.so
JAR := build/gluon_dyn.jar

ifeq ($(JAVAC),)
java:
	@echo "javac not found: the Java binding (build/gluon_dyn.jar) is not built and its tests skip"
else
JDK_DIR = $(patsubst %/bin/javac,%,$(realpath $(JAVAC)))
java: $(JAR)

$(JNI_LIB): src/java/gluon_dyn_jni.c src/runtime/gluon_dyn_runtime.h $(RUNTIME_LIB)
	$(CC) -O2 -std=c99 -Wall -fPIC -shared -Isrc/runtime -I$(JDK_DIR)/include \
	    -I$(JDK_DIR)/include/linux $< -o $@ -Lbuild -lgluon_dyn_runtime \
	    -Wl,--no-undefined -Wl,-rpath,$(abspath build)

$(JAR): $(JAVA_SRC) $(JNI_LIB)
	rm -rf build/java-classes && mkdir -p build/java-classes/gluondyn
	javac -Werror -Xlint:all -d build/java-classes $(JAVA_SRC)
	cp $(JNI_LIB) build/java-classes/gluondyn/
	jar cf $@ -C build/java-classes .
endif

# examples/deploy: a model trained and exported in Python, run from C and from Java.
DEPLOY_DIR := build/deploy
.PHONY: deploy-demo
deploy-demo: setup
	mkdir -p $(DEPLOY_DIR)
	$(PY) examples/deploy/train_and_export.py $(DEPLOY_DIR)/model
	$(CC) -std=c99 -Wall -Isrc/runtime examples/deploy/predict.c -Lbuild -lgluon_dyn_runtime \
	    -Wl,-rpath,$(abspath build) -lm -o $(DEPLOY_DIR)/predict
	$(DEPLOY_DIR)/predict $(DEPLOY_DIR)/model
ifneq ($(JAVAC),)
	javac -cp $(JAR) -d $(DEPLOY_DIR) examples/deploy/Main.java
	cd $(DEPLOY_DIR) && java -cp ../gluon_dyn.jar:. Main model
endif

# Generated programs, imperative vs hybridize(dynamic=True), for FUZZ_MINUTES minutes,
# on a random seed printed first: `make fuzz FUZZ_SEED=S` repeats the run of seed S
# (the same programs in the same order). Exits non-zero on any disagreement, each
# shrunk (for at most a minute past the run's end) and written to fuzz-failures/
# with its calls (tests/fuzzing/regressions/ holds such files as tests).
FUZZ_MINUTES ?= 5
.PHONY: fuzz
fuzz: setup
	FUZZ_MINUTES=$(FUZZ_MINUTES) $(if $(FUZZ_SEED),FUZZ_SEED=$(FUZZ_SEED)) $(PY) tests/fuzz.py

# The corpus of real programs (tests/corpus) imperative vs hybridize(dynamic=True): correctness,
# share on graphs, graph breaks, speed, first calls, peak memory; writes docs/corpus.md and
# docs/corpus.json (with the floors it misses). CORPUS_PROGRAMS="a b" measures some.
.PHONY: corpus
corpus: setup
	$(PY) benchmarks/corpus_report.py $(CORPUS_PROGRAMS)

# The JANUS workloads (examples/train) imperative vs dynamic vs TVM, and the
# Horovod scale factor: writes docs/benchmarks.md and its plots (a few minutes on a quiet machine).
.PHONY: report
report: setup
	$(PY) benchmarks/training_report.py

# The documentation (docs/, Sphinx with MyST): HTML in build/docs, any warning an error.
# autodoc imports the package, so it needs the installed library. -E reads every page
# afresh: an incremental build would not repeat the warnings of pages it did not re-read.
.PHONY: docs
docs: $(NATIVE_LIB)
	$(PY) -m sphinx -W --keep-going -E -b html docs build/docs
