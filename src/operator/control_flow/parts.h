// An array and its parts along one axis, copied a contiguous run at a time:
// shared by gluon_dyn_split (an array into equal parts) and gluon_dyn_concat
// (parts of any lengths into one array).
#ifndef GLUON_DYN_OPERATOR_CONTROL_FLOW_PARTS_H_
#define GLUON_DYN_OPERATOR_CONTROL_FLOW_PARTS_H_

#include <cstdint>
#include <vector>

#include "common.h"

namespace gluon_dyn {

// The whole array seen as (outer, axis length, inner) elements of `bytes` each.
struct Layout {
  int64_t outer = 1, length = 0, inner = 1;
  size_t bytes = 0;
};

Layout LayoutOf(const mxnet::ext::MXTensor& whole, int axis);

// Copies between the whole array and its parts (part k spans `lengths[k]` along
// the axis, in order), in the direction `to_parts` says; a null part is skipped.
void CopyParts(const Layout& layout, char* whole, const std::vector<char*>& parts,
               const std::vector<int64_t>& lengths, bool to_parts);

}  // namespace gluon_dyn

#endif  // GLUON_DYN_OPERATOR_CONTROL_FLOW_PARTS_H_
