// One array of a call as the plan's steps pass it along: an MXNet array, a TVM tensor or the
// caller's input memory, converted on demand (without copies where the memory allows).
#ifndef GLUON_DYN_RUNTIME_VALUE_H_
#define GLUON_DYN_RUNTIME_VALUE_H_

#include <tvm/ffi/container/tensor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mxnet.h"

namespace gd {

class Value {
 public:
  Value() = default;
  static Value of(mx::NDArray array);
  static Value of(tvm::ffi::Tensor tensor);
  // The caller's float32 input, read in place.
  static Value borrow(const float *data, std::vector<int64_t> shape);

  // Gives an MXNet array a TVM copy of its own, made now (parameters: MXNet may re-lay out its
  // array for oneDNN later, which a view would not follow).
  void copy_for_tvm();

  bool empty() const { return !array_ && !tensor_ && !borrowed_; }
  NDArrayHandle mxnet();
  const tvm::ffi::Tensor &tvm();
  std::vector<int64_t> shape() const;
  std::string dtype() const;
  // The finished float32 data (valid while this value lives); gd::Error for another dtype.
  const float *float_data();

 private:
  std::shared_ptr<mx::NDArray> array_;
  std::optional<tvm::ffi::Tensor> tensor_;
  const float *borrowed_ = nullptr;
  std::vector<int64_t> borrowed_shape_;
};

}  // namespace gd

#endif  // GLUON_DYN_RUNTIME_VALUE_H_
