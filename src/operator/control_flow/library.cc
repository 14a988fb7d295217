// Entry point MXNet calls when mx.library.load() opens this library.
#include <mxnet/lib_api.h>

// MXNET_VERSION = major*10000 + minor*100 + patch. The ops are built against
// the 1.9 lib_api (version 11); older runtimes use a different ABI.
mxnet::ext::MXReturnValue initialize(int version) {
  if (version >= 10900) return mxnet::ext::MX_SUCCESS;
  MX_ERROR_MSG << "gluon_dyn ops need MXNet >= 1.9.0, got version " << version;
  return mxnet::ext::MX_FAIL;
}
