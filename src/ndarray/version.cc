// The version of an MXNet NDArray's engine variable, for Python (ctypes).
//
// MXNet counts every completed write to an array (an operator's output, an
// optimizer update, `x[:] = ...`, load_parameters) in the version of the
// array's engine variable, but MXNet 1.9.1's C API does not return it. Code
// that keeps something derived from an array (tvm_bridge's prepared weights)
// compares versions to know the array was written since.
//
// Built against the mxnet wheel's own headers, with MXNET_USE_MKLDNN set as
// that wheel was built (it changes the NDArray's layout; see the Makefile).
#include <mxnet/ndarray.h>

extern "C" size_t gluon_dyn_ndarray_version(void* handle) {
  return static_cast<const mxnet::NDArray*>(handle)->version();
}

// The versions of `count` arrays in one call, each once MXNet's pending writes to
// it are done (a write is counted when it completes): a plan checks a segment's
// parameters at every call, and one call instead of two per array saves ~1 us each.
// `wait_to_read` is MXNet's MXNDArrayWaitToRead, passed by the caller: this library
// is not linked against libmxnet, whose engine symbols are not exported to it.
extern "C" int gluon_dyn_ndarray_versions(void** handles, size_t count, size_t* versions,
                                          int (*wait_to_read)(void*)) {
  for (size_t i = 0; i < count; ++i) {
    if (wait_to_read(handles[i]) != 0) return -1;
    versions[i] = static_cast<const mxnet::NDArray*>(handles[i])->version();
  }
  return 0;
}
