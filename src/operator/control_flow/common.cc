#include "common.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace gluon_dyn {

using mxnet::ext::MXTensor;

bool ParseCount(const Attrs& attrs, const std::string& key, const char* fallback,
                const char* op_name, int* out) {
  auto it = attrs.find(key);
  if (it == attrs.end() && fallback == nullptr) {
    GLUON_DYN_ERROR << op_name << ": missing required attribute '" << key << "'";
    return false;
  }
  const std::string text = it == attrs.end() ? std::string(fallback) : it->second;
  errno = 0;
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);  // NOLINT(runtime/int)
  if (text.empty() || *end != '\0' || errno != 0 || value < 0 || value > 1000000) {
    GLUON_DYN_ERROR << op_name << ": attribute '" << key
                 << "' must be a non-negative integer, got '" << text << "'";
    return false;
  }
  *out = static_cast<int>(value);
  return true;
}

size_t DTypeSize(int dtype) {
  switch (dtype) {
    case mxnet::ext::kFloat32: return 4;
    case mxnet::ext::kFloat64: return 8;
    case mxnet::ext::kFloat16: return 2;
    case mxnet::ext::kUint8:   return 1;
    case mxnet::ext::kInt32:   return 4;
    case mxnet::ext::kInt8:    return 1;
    case mxnet::ext::kInt64:   return 8;
    default:                   return 0;
  }
}

bool CheckTypes(const std::vector<int>& types, const char* op_name) {
  for (size_t i = 0; i < types.size(); ++i) {
    if (types[i] >= 0 && DTypeSize(types[i]) == 0) {
      GLUON_DYN_ERROR << op_name << ": input " << i << " has unsupported dtype code "
                   << types[i]
                   << " (supported: float32, float64, float16, uint8, int8, int32, int64)";
      return false;
    }
  }
  return true;
}

bool HasStorage(const MXTensor& t) {
  return t.data_ptr != nullptr && t.size() > 0;
}

bool CopyTensor(const MXTensor& src, MXTensor* dst, const char* op_name) {
  if (!HasStorage(*dst) || src.data_ptr == dst->data_ptr) return true;
  if (src.dtype != dst->dtype || src.size() != dst->size()) {
    GLUON_DYN_ERROR << op_name << ": output does not match input (dtype " << dst->dtype
                 << " vs " << src.dtype << ", size " << dst->size() << " vs "
                 << src.size() << ")";
    return false;
  }
  std::memcpy(dst->data_ptr, src.data_ptr, src.size() * DTypeSize(src.dtype));
  return true;
}

void ZeroTensor(MXTensor* dst) {
  if (!HasStorage(*dst)) return;
  std::memset(dst->data_ptr, 0, dst->size() * DTypeSize(dst->dtype));
}

mxnet::ext::MXReturnValue PassThroughTypes(const char* op_name, const std::vector<int>& in_types,
                                           std::vector<int>* out_types) {
  if (!CheckTypes(in_types, op_name)) return mxnet::ext::MX_FAIL;
  for (size_t i = 0; i < out_types->size(); ++i) (*out_types)[i] = in_types[i];
  return mxnet::ext::MX_SUCCESS;
}

mxnet::ext::MXReturnValue InferPassThroughShapes(
    const Attrs&, std::vector<std::vector<unsigned int>>* in_shapes,
    std::vector<std::vector<unsigned int>>* out_shapes) {
  for (size_t i = 0; i < out_shapes->size(); ++i) (*out_shapes)[i] = (*in_shapes)[i];
  return mxnet::ext::MX_SUCCESS;
}

}  // namespace gluon_dyn
