#include "libraries.h"

#include <dlfcn.h>
#include <sched.h>
#include <stdlib.h>

#include <map>
#include <mutex>
#include <string>

#include "error.h"
#include "mxnet.h"

// Absolute paths given by the Makefile.
#ifndef GD_OPERATOR_LIBRARY
#error "GD_OPERATOR_LIBRARY (the path of libgluon_dyn_ops.so) must be defined"
#endif
#ifndef GD_TVM_RUNTIME_LIBRARY
#error "GD_TVM_RUNTIME_LIBRARY (the path of TVM's libtvm_runtime.so) must be defined"
#endif
#ifndef GD_TVM_FFI_LIBRARY
#error "GD_TVM_FFI_LIBRARY (the path of TVM's libtvm_ffi.so) must be defined"
#endif
#ifndef GD_MXNET_LIBRARY
#error "GD_MXNET_LIBRARY (the path of the mxnet wheel's libmxnet.so) must be defined"
#endif

namespace gd {

namespace {

void *open_global(const char *path) {
  // RTLD_GLOBAL: TVM's segment libraries leave TVM's functions undefined, to be taken from
  // the libraries already in the process.
  void *handle = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (handle == nullptr) throw Error(std::string("cannot load ") + path + ": " + dlerror());
  return handle;
}

}  // namespace

void load_operator_library() {
  static std::once_flag loaded;
  std::call_once(loaded, [] {  // runs again after a load that threw
    mx::check(mx::api().MXLoadLib(GD_OPERATOR_LIBRARY, 0),
              std::string("gluon_dyn's operator library ") + GD_OPERATOR_LIBRARY);
  });
}

void load_tvm_runtime() {
  static std::once_flag loaded;
  std::call_once(loaded, [] {  // runs again after a load that threw
    // As tvm_bridge's runtime.py: a thread per CPU this process may use, and no pinning (a
    // pinned caller passes its one-CPU mask to every thread it creates later, MXNet's too).
    cpu_set_t cpus;
    int count = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
    setenv("TVM_NUM_THREADS", std::to_string(count).c_str(), 0);
    setenv("TVM_BIND_THREADS", "0", 0);
    open_global(GD_TVM_FFI_LIBRARY);
    open_global(GD_TVM_RUNTIME_LIBRARY);
  });
}

void load_external(const std::string &library, const std::string &symbol) {
  if (library.empty() || library.find('/') != std::string::npos || library == "." ||
      library == "..") {
    throw Error("external library \"" + library +
                "\": a file name of the mxnet package is expected, not a path");
  }
  static std::mutex mutex;
  static std::map<std::string, void *> loaded;  // file name -> handle
  std::lock_guard<std::mutex> lock(mutex);
  auto found = loaded.find(library);
  if (found == loaded.end()) {
    std::string mxnet = GD_MXNET_LIBRARY;
    std::string path = mxnet.substr(0, mxnet.rfind('/') + 1) + library;
    void *handle;
    try {
      handle = open_global(path.c_str());
    } catch (const Error &error) {
      throw Error("external library " + library + ": " + error.what());
    }
    found = loaded.emplace(library, handle).first;
  }
  void *handle = found->second;
  if (dlsym(handle, symbol.c_str()) == nullptr) {
    throw Error("external library " + library + " has no function " + symbol);
  }
}

}  // namespace gd
