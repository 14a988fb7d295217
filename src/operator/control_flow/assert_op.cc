// gluon_dyn_assert: fails the graph run when a speculated assumption is false.
// Inputs: pred, data_0..data_{num_data-1}. Outputs: the same arrays, copied,
// so that consumers of the data depend on the check having run.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common.h"

namespace gluon_dyn {
namespace {

using mxnet::ext::MXReturnValue;
using mxnet::ext::MXTensor;
using mxnet::ext::MX_FAIL;
using mxnet::ext::MX_SUCCESS;

constexpr char kOpName[] = "gluon_dyn_assert";

template <typename T>
bool AllNonzero(const MXTensor& t) {
  const T* p = static_cast<const T*>(t.data_ptr);
  const int64_t n = t.size();
  for (int64_t i = 0; i < n; ++i) {
    if (p[i] == T(0)) return false;
  }
  return true;
}

// float16 is checked on its bits: both signed zeros have all non-sign bits 0,
// and NaN counts as nonzero like it does for float32/float64.
bool AllNonzeroHalf(const MXTensor& t) {
  const uint16_t* p = static_cast<const uint16_t*>(t.data_ptr);
  const int64_t n = t.size();
  for (int64_t i = 0; i < n; ++i) {
    if ((p[i] & 0x7FFFu) == 0) return false;
  }
  return true;
}

// Returns false with an error message for dtypes that cannot hold a predicate.
bool EvalPred(const MXTensor& pred, bool* holds) {
  if (pred.size() == 0) {  // an empty predicate asserts nothing
    *holds = true;
    return true;
  }
  switch (pred.dtype) {
    case mxnet::ext::kFloat32: *holds = AllNonzero<float>(pred); return true;
    case mxnet::ext::kFloat64: *holds = AllNonzero<double>(pred); return true;
    case mxnet::ext::kFloat16: *holds = AllNonzeroHalf(pred); return true;
    case mxnet::ext::kUint8:   *holds = AllNonzero<uint8_t>(pred); return true;
    case mxnet::ext::kInt8:    *holds = AllNonzero<int8_t>(pred); return true;
    case mxnet::ext::kInt32:   *holds = AllNonzero<int32_t>(pred); return true;
    case mxnet::ext::kInt64:   *holds = AllNonzero<int64_t>(pred); return true;
    default:
      GLUON_DYN_ERROR << kOpName << ": unsupported predicate dtype code " << pred.dtype;
      return false;
  }
}

std::string Message(const Attrs& attrs) {
  auto it = attrs.find("message");
  return it == attrs.end() ? std::string() : it->second;
}

MXReturnValue ParseAttrs(const Attrs& attrs, int* num_in, int* num_out) {
  int num_data = 0;
  if (!ParseCount(attrs, "num_data", "0", kOpName, &num_data)) return MX_FAIL;
  *num_in = 1 + num_data;
  *num_out = 1 + num_data;
  return MX_SUCCESS;
}

MXReturnValue Forward(const Attrs& attrs, std::vector<MXTensor>* inputs,
                      std::vector<MXTensor>* outputs, const mxnet::ext::OpResource& res) {
  bool holds = false;
  if (!EvalPred((*inputs)[0], &holds)) return MX_FAIL;
  if (!holds) {
    GLUON_DYN_ERROR << "gluon_dyn assumption failed: " << Message(attrs);
    return MX_FAIL;
  }
  for (size_t i = 0; i < outputs->size(); ++i) {
    if (!CopyTensor((*inputs)[i], &(*outputs)[i], kOpName)) return MX_FAIL;
  }
  return MX_SUCCESS;
}

// Backward inputs are [ograds (n), forward inputs (n), forward outputs (n)];
// outputs are the n input gradients. The predicate is not differentiable.
MXReturnValue Backward(const Attrs& attrs, std::vector<MXTensor>* inputs,
                       std::vector<MXTensor>* outputs, const mxnet::ext::OpResource& res) {
  const size_t n = outputs->size();
  if (inputs->size() != 3 * n) {
    GLUON_DYN_ERROR << kOpName << ": backward expected " << 3 * n << " inputs, got "
                 << inputs->size();
    return MX_FAIL;
  }
  ZeroTensor(&(*outputs)[0]);
  for (size_t i = 1; i < n; ++i) {
    if (!CopyTensor((*inputs)[i], &(*outputs)[i], kOpName)) return MX_FAIL;
  }
  return MX_SUCCESS;
}

}  // namespace
}  // namespace gluon_dyn

REGISTER_OP(gluon_dyn_assert)
.setParseAttrs(gluon_dyn::ParseAttrs)
.setInferType(gluon_dyn::InferPassThroughTypes<gluon_dyn::kOpName>)
.setInferShape(gluon_dyn::InferPassThroughShapes)
.setForward(gluon_dyn::Forward, "cpu")
.setBackward(gluon_dyn::Backward, "cpu");
