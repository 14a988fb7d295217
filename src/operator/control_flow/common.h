// Helpers shared by the gluon_dyn control-flow operators.
#ifndef GLUON_DYN_CONTROL_FLOW_COMMON_H_
#define GLUON_DYN_CONTROL_FLOW_COMMON_H_

#include <mxnet/lib_api.h>

#include "error.h"

#include <string>
#include <unordered_map>
#include <vector>

namespace gluon_dyn {

using Attrs = std::unordered_map<std::string, std::string>;

// Reads a non-negative integer attribute. Attribute values arrive as strings
// and a malformed count would otherwise silently become 0, so reject it.
bool ParseCount(const Attrs& attrs, const std::string& key, const char* fallback,
                const char* op_name, int* out);

// Bytes per element, or 0 for dtypes MXTensor cannot carry (bool, int16,
// bfloat16, ...): lib_api throws across the C boundary on those, so every op
// rejects them at type-inference time, where MXNet reports a clean error.
size_t DTypeSize(int dtype);

// Checks the inferred input types; unknown (-1) is allowed and left unchanged.
bool CheckTypes(const std::vector<int>& types, const char* op_name);

// Both operators' outputs are like their leading inputs (pass-through copies):
// output i takes the type and shape of input i. Templates, because lib_api takes
// plain function pointers and the type check names the operator.
mxnet::ext::MXReturnValue PassThroughTypes(const char* op_name, const std::vector<int>& in_types,
                                           std::vector<int>* out_types);

template <const char* OpName>
mxnet::ext::MXReturnValue InferPassThroughTypes(const Attrs&, std::vector<int>* in_types,
                                                std::vector<int>* out_types) {
  return PassThroughTypes(OpName, *in_types, out_types);
}

mxnet::ext::MXReturnValue InferPassThroughShapes(
    const Attrs&, std::vector<std::vector<unsigned int>>* in_shapes,
    std::vector<std::vector<unsigned int>>* out_shapes);

// lib_api does not pass OpReqType, so kNullOp outputs may have no storage.
bool HasStorage(const mxnet::ext::MXTensor& t);

// Byte copy. Inference should make dtype and size match; a mismatch is reported
// rather than trusted, since a wrong size here would write out of bounds.
bool CopyTensor(const mxnet::ext::MXTensor& src, mxnet::ext::MXTensor* dst,
                const char* op_name);

void ZeroTensor(mxnet::ext::MXTensor* dst);

}  // namespace gluon_dyn

#endif  // GLUON_DYN_CONTROL_FLOW_COMMON_H_
