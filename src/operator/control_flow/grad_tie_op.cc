// gluon_dyn_grad_tie: identity on the tied arrays whose backward also emits
// (zero) gradients for the anchor arrays. MXNet 1.9.1's _while_loop backward
// leaves a loop variable's gradient uninitialised when that gradient is not
// requested (kNullOp), which corrupts parameter gradients; tying the initial
// loop values to the other loop inputs makes MXNet request those gradients.
// Inputs: tied_0..tied_{num_tied-1}, anchor_0..anchor_{num_anchors-1}.
#include <string>
#include <vector>

#include "common.h"

namespace gluon_dyn {
namespace {

using mxnet::ext::MXReturnValue;
using mxnet::ext::MXTensor;
using mxnet::ext::MX_FAIL;
using mxnet::ext::MX_SUCCESS;

constexpr char kOpName[] = "gluon_dyn_grad_tie";

// Input count must be fixed by attributes, so anchors are counted explicitly.
bool Counts(const Attrs& attrs, int* num_tied, int* num_anchors) {
  return ParseCount(attrs, "num_tied", nullptr, kOpName, num_tied) &&
         ParseCount(attrs, "num_anchors", "0", kOpName, num_anchors);
}

MXReturnValue ParseAttrs(const Attrs& attrs, int* num_in, int* num_out) {
  int num_tied = 0, num_anchors = 0;
  if (!Counts(attrs, &num_tied, &num_anchors)) return MX_FAIL;
  if (num_tied < 1) {
    GLUON_DYN_ERROR << kOpName << ": num_tied must be at least 1";
    return MX_FAIL;
  }
  *num_in = num_tied + num_anchors;
  *num_out = num_tied;
  return MX_SUCCESS;
}

MXReturnValue Forward(const Attrs& attrs, std::vector<MXTensor>* inputs,
                      std::vector<MXTensor>* outputs, const mxnet::ext::OpResource& res) {
  for (size_t i = 0; i < outputs->size(); ++i) {
    if (!CopyTensor((*inputs)[i], &(*outputs)[i], kOpName)) return MX_FAIL;
  }
  return MX_SUCCESS;
}

// Backward inputs are [ograds (num_tied), forward inputs (num_tied + num_anchors),
// forward outputs (num_tied)]; outputs are one gradient per forward input.
MXReturnValue Backward(const Attrs& attrs, std::vector<MXTensor>* inputs,
                       std::vector<MXTensor>* outputs, const mxnet::ext::OpResource& res) {
  int num_tied = 0, num_anchors = 0;
  if (!Counts(attrs, &num_tied, &num_anchors)) return MX_FAIL;
  const size_t tied = num_tied, total = outputs->size();
  if (total != tied + num_anchors || inputs->size() != 2 * tied + total) {
    GLUON_DYN_ERROR << kOpName << ": backward got " << inputs->size() << " inputs and "
                 << total << " outputs for num_tied=" << num_tied
                 << ", num_anchors=" << num_anchors;
    return MX_FAIL;
  }
  for (size_t i = 0; i < tied; ++i) {
    if (!CopyTensor((*inputs)[i], &(*outputs)[i], kOpName)) return MX_FAIL;
  }
  for (size_t i = tied; i < total; ++i) ZeroTensor(&(*outputs)[i]);
  return MX_SUCCESS;
}

}  // namespace
}  // namespace gluon_dyn

REGISTER_OP(gluon_dyn_grad_tie)
.setParseAttrs(gluon_dyn::ParseAttrs)
.setInferType(gluon_dyn::InferPassThroughTypes<gluon_dyn::kOpName>)
.setInferShape(gluon_dyn::InferPassThroughShapes)
.setForward(gluon_dyn::Forward, "cpu")
.setBackward(gluon_dyn::Backward, "cpu");
