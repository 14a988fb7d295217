// DLPack tensors over float32 memory the runtime does not own (the caller's inputs).
#ifndef GLUON_DYN_RUNTIME_BORROWED_H_
#define GLUON_DYN_RUNTIME_BORROWED_H_

#include <dlpack/dlpack.h>

#include <cstdint>
#include <vector>

namespace gd {

// A dense row-major view of `data`; its deleter frees the view, never `data`.
DLManagedTensor *borrow_floats(const float *data, const std::vector<int64_t> &shape);

}  // namespace gd

#endif  // GLUON_DYN_RUNTIME_BORROWED_H_
