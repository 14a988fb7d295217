// The libraries a model may need besides libmxnet.so (which the runtime links): gluon_dyn's
// operator library and TVM's runtime, found where they were when the runtime was built.
#ifndef GLUON_DYN_RUNTIME_LIBRARIES_H_
#define GLUON_DYN_RUNTIME_LIBRARIES_H_

#include <string>

namespace gd {

// Registers gluon_dyn's operators (gluon_dyn_assert, gluon_dyn_grad_tie) with MXNet; once per
// process. gd::Error naming the library when it cannot be loaded.
void load_operator_library();

// Makes TVM's runtime available to segment libraries (which take its symbols from the
// process) and sets TVM's thread-pool defaults; once per process.
void load_tvm_runtime();

// Makes `symbol` of `library` (a file name in the mxnet wheel's folder, as a segment's
// signature lists it: tvm_bridge's OpenBLAS kernels call cblas_sgemm) available to segment
// libraries: loaded with its symbols global (its thread count left alone, as in
// tvm_bridge/runtime.py). gd::Error naming the library or symbol when it cannot be had, or
// when `library` is a path.
void load_external(const std::string &library, const std::string &symbol);

}  // namespace gd

#endif  // GLUON_DYN_RUNTIME_LIBRARIES_H_
