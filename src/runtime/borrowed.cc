#include "borrowed.h"

namespace gd {

namespace {

struct Borrowed {
  DLManagedTensor managed;
  std::vector<int64_t> shape;
};

void delete_view(DLManagedTensor *self) { delete static_cast<Borrowed *>(self->manager_ctx); }

}  // namespace

DLManagedTensor *borrow_floats(const float *data, const std::vector<int64_t> &shape) {
  auto *view = new Borrowed{{}, shape};
  DLTensor &tensor = view->managed.dl_tensor;
  tensor.data = const_cast<float *>(data);  // read only: neither MXNet nor TVM writes inputs
  tensor.device = {kDLCPU, 0};
  tensor.ndim = static_cast<int>(shape.size());
  tensor.dtype = {kDLFloat, 32, 1};
  tensor.shape = view->shape.data();
  tensor.strides = nullptr;
  tensor.byte_offset = 0;
  view->managed.manager_ctx = view;
  view->managed.deleter = delete_view;
  return &view->managed;
}

}  // namespace gd
