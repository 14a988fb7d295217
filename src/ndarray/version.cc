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
