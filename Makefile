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

.PHONY: setup test demo native clean

setup: $(STAMP) $(NATIVE_LIB) runtime java

$(PY):
	$(PYTHON_BOOTSTRAP) -m venv $(VENV)

$(STAMP): $(PY) requirements.txt setup.py
	$(PY) -m pip install -q wheel -r requirements.txt
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $(STAMP)

native: $(NATIVE_LIB)

$(NATIVE_LIB): $(STAMP) $(NATIVE_SRC)
	mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -shared -I$(MX_DIR)/include \
	    $(filter %.cc,$(NATIVE_SRC)) $(MX_DIR)/src/lib_api.cc -o $@

test: setup
	$(PY) -m pytest tests

demo: setup
	$(PY) examples/demo.py
	$(PY) examples/dynamic_demo.py
	$(MAKE) --no-print-directory deploy-demo

clean:
	rm -rf $(VENV) gluon_dyn/_lib build *.egg-info

# The C runtime (build/libgluon_dyn_runtime.so, header src/runtime/gluon_dyn_runtime.h), linked
# against the tvm wheel's libtvm_ffi.so by absolute rpath; it loads libmxnet.so, TVM's runtime
# and the operator library from the absolute paths compiled in: programs need no environment.
RUNTIME_SRC := $(wildcard src/runtime/*.cc) $(wildcard src/runtime/*.h) src/runtime/exports.map
RUNTIME_LIB := build/libgluon_dyn_runtime.so
package_dir = $(shell $(PY) -c "import importlib.util as u; print(u.find_spec('$(1)').submodule_search_locations[0])")

.PHONY: runtime java
runtime: $(RUNTIME_LIB)

$(RUNTIME_LIB): $(STAMP) $(NATIVE_LIB) $(RUNTIME_SRC)
	mkdir -p $(dir $@)
	MX=$(call package_dir,mxnet); TVM=$(call package_dir,tvm); FFI=$(call package_dir,tvm_ffi); \
	$(CXX) $(CXXFLAGS) -shared -I$$FFI/include -I$$MX/include \
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
