#include "libraries.h"

#include <dlfcn.h>
#include <sched.h>
#include <stdlib.h>

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

namespace gd {

namespace {

void open_global(const char *path) {
  // RTLD_GLOBAL: TVM's segment libraries leave TVM's functions undefined, to be taken from
  // the libraries already in the process.
  if (dlopen(path, RTLD_NOW | RTLD_GLOBAL) == nullptr) {
    throw Error(std::string("cannot load ") + path + ": " + dlerror());
  }
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

}  // namespace gd
