#include "value.h"

#include <tvm/ffi/dtype.h>

#include <cstdlib>
#include <cstring>

#include "borrowed.h"
#include "error.h"

namespace gd {

namespace {

// TVM's compiled kernels assume this alignment of every array they are given.
constexpr size_t kTvmAlignment = 64;

struct AlignedAllocator {
  void AllocData(DLTensor *tensor) {
    size_t bytes = tvm::ffi::GetDataSize(*tensor);
    tensor->data = std::aligned_alloc(kTvmAlignment, (bytes + kTvmAlignment - 1) /
                                                         kTvmAlignment * kTvmAlignment);
    if (tensor->data == nullptr) throw Error("out of memory for a copy of " +
                                             std::to_string(bytes) + " bytes");
  }
  void FreeData(DLTensor *tensor) { std::free(tensor->data); }
};

tvm::ffi::Tensor aligned_copy(const DLTensor &source) {
  tvm::ffi::Tensor copy = tvm::ffi::Tensor::FromNDAlloc(
      AlignedAllocator(), tvm::ffi::ShapeView(source.shape, source.ndim), source.dtype,
      source.device);
  std::memcpy(copy.data_ptr(), static_cast<const char *>(source.data) + source.byte_offset,
              tvm::ffi::GetDataSize(source));
  return copy;
}

// A DLPack tensor released when this goes out of scope, unless passed on.
using OwnedDLPack = std::unique_ptr<DLManagedTensor, void (*)(DLManagedTensor *)>;

OwnedDLPack own(DLManagedTensor *managed) {
  return OwnedDLPack(managed, [](DLManagedTensor *self) { self->deleter(self); });
}

// `managed` as a TVM tensor: in place when aligned, else copied (then released).
tvm::ffi::Tensor to_tvm(DLManagedTensor *managed) {
  OwnedDLPack owned = own(managed);
  const DLTensor &source = managed->dl_tensor;
  if (tvm::ffi::IsAligned(source, kTvmAlignment) && tvm::ffi::IsContiguous(source)) {
    return tvm::ffi::Tensor::FromDLPack(owned.release());
  }
  return aligned_copy(source);
}

}  // namespace

Value Value::of(mx::NDArray array) {
  Value value;
  value.array_ = std::make_shared<mx::NDArray>(std::move(array));
  return value;
}

Value Value::of(tvm::ffi::Tensor tensor) {
  Value value;
  value.tensor_ = std::move(tensor);
  return value;
}

Value Value::borrow(const float *data, std::vector<int64_t> shape) {
  Value value;
  value.borrowed_ = data;
  value.borrowed_shape_ = std::move(shape);
  return value;
}

void Value::copy_for_tvm() {
  if (tensor_) return;  // made for an earlier step reading the same parameter
  OwnedDLPack view = own(array_->to_dlpack());
  tensor_ = aligned_copy(view->dl_tensor);
}

NDArrayHandle Value::mxnet() {
  if (!array_) {
    mx::NDArray array = tensor_ ? mx::NDArray::from_dlpack(tensor_->ToDLPack())
                                : mx::NDArray::borrow(borrowed_, borrowed_shape_);
    array_ = std::make_shared<mx::NDArray>(std::move(array));
  }
  return array_->get();
}

const tvm::ffi::Tensor &Value::tvm() {
  if (!tensor_) {
    tensor_ = to_tvm(array_ ? array_->to_dlpack() : borrow_floats(borrowed_, borrowed_shape_));
  }
  return *tensor_;
}

std::vector<int64_t> Value::shape() const {
  if (tensor_) {
    tvm::ffi::ShapeView shape = tensor_->shape();
    return std::vector<int64_t>(shape.begin(), shape.end());
  }
  return array_ ? array_->shape() : borrowed_shape_;
}

std::string Value::dtype() const {
  if (tensor_) return std::string(tvm::ffi::DLDataTypeToString(tensor_->dtype()));
  return array_ ? mx::dtype_name(array_->dtype()) : "float32";
}

const float *Value::float_data() {
  if (borrowed_) return borrowed_;
  if (array_ && !tensor_) array_->wait();
  std::string type = dtype();
  if (type != "float32") {
    throw Error("the output has dtype " + type + "; this version of the runtime returns float32 "
                "outputs only");
  }
  return static_cast<const float *>(tensor_ ? tensor_->data_ptr() : array_->data());
}

}  // namespace gd
