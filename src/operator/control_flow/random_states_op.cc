// gluon_dyn_random_states_save and gluon_dyn_random_states_restore: a copy of
// MXNet's CPU random states (the 1,024 std::mt19937 of its parallel random
// resource, which Dropout and the sampling operators draw from) and its return.
// A speculative graph whose guards fail is run again as Python: the numbers its
// run drew are drawn again, as the program as written draws them once. Both
// request the resource, so MXNet's engine orders them with the operators drawing
// from it.
// save: one input (any array: the context), output the copy (uint8).
// restore: the copy in, one uint8 out (MXNet's operators have an output).
#include <cstring>
#include <random>
#include <vector>

#include "common.h"

namespace gluon_dyn {
namespace {

using mxnet::ext::MXReturnValue;
using mxnet::ext::MXTensor;
using mxnet::ext::MX_FAIL;
using mxnet::ext::MX_SUCCESS;

constexpr char kSaveName[] = "gluon_dyn_random_states_save";
constexpr char kRestoreName[] = "gluon_dyn_random_states_restore";
constexpr unsigned kStatesBytes = MX_NUM_CPU_RANDOM_STATES * sizeof(mxnet::ext::mx_cpu_rand_t);

MXReturnValue OneInOneOut(const Attrs&, int* num_in, int* num_out) {
  *num_in = 1;
  *num_out = 1;
  return MX_SUCCESS;
}

MXReturnValue BytesOut(const Attrs&, std::vector<int>*, std::vector<int>* out_types) {
  (*out_types)[0] = mxnet::ext::kUint8;
  return MX_SUCCESS;
}

MXReturnValue SaveShape(const Attrs&, std::vector<std::vector<unsigned int>>*,
                        std::vector<std::vector<unsigned int>>* out_shapes) {
  (*out_shapes)[0] = {kStatesBytes};
  return MX_SUCCESS;
}

MXReturnValue RestoreShape(const Attrs&, std::vector<std::vector<unsigned int>>* in_shapes,
                           std::vector<std::vector<unsigned int>>* out_shapes) {
  const auto& copy = (*in_shapes)[0];
  if (copy.size() != 1 || copy[0] != kStatesBytes) {
    GLUON_DYN_ERROR << kRestoreName << ": takes what " << kSaveName << " gave (" << kStatesBytes
                    << " bytes)";
    return MX_FAIL;
  }
  (*out_shapes)[0] = {1};
  return MX_SUCCESS;
}

MXReturnValue Save(const Attrs&, std::vector<MXTensor>*, std::vector<MXTensor>* outputs,
                   const mxnet::ext::OpResource& resource) {
  std::memcpy((*outputs)[0].data_ptr, resource.get_cpu_rand_states(), kStatesBytes);
  return MX_SUCCESS;
}

MXReturnValue Restore(const Attrs&, std::vector<MXTensor>* inputs, std::vector<MXTensor>*,
                      const mxnet::ext::OpResource& resource) {
  const MXTensor& copy = (*inputs)[0];
  if (copy.dtype != mxnet::ext::kUint8 || copy.size() != kStatesBytes) {
    GLUON_DYN_ERROR << kRestoreName << ": takes what " << kSaveName << " gave";
    return MX_FAIL;
  }
  std::memcpy(resource.get_cpu_rand_states(), copy.data_ptr, kStatesBytes);
  return MX_SUCCESS;
}

}  // namespace
}  // namespace gluon_dyn

REGISTER_OP(gluon_dyn_random_states_save)
.setParseAttrs(gluon_dyn::OneInOneOut)
.setInferType(gluon_dyn::BytesOut)
.setInferShape(gluon_dyn::SaveShape)
.setForward(gluon_dyn::Save, "cpu");

REGISTER_OP(gluon_dyn_random_states_restore)
.setParseAttrs(gluon_dyn::OneInOneOut)
.setInferType(gluon_dyn::BytesOut)
.setInferShape(gluon_dyn::RestoreShape)
.setForward(gluon_dyn::Restore, "cpu");
