#include "parts.h"

#include <cstring>

namespace gluon_dyn {

Layout LayoutOf(const mxnet::ext::MXTensor& whole, int axis) {
  Layout layout;
  for (int i = 0; i < axis; ++i) layout.outer *= whole.shape[i];
  layout.length = whole.shape[axis];
  for (size_t i = axis + 1; i < whole.shape.size(); ++i) layout.inner *= whole.shape[i];
  layout.bytes = DTypeSize(whole.dtype);
  return layout;
}

void CopyParts(const Layout& layout, char* whole, const std::vector<char*>& parts,
               const std::vector<int64_t>& lengths, bool to_parts) {
  const size_t row = layout.length * layout.inner * layout.bytes;
  size_t offset = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    const size_t run = lengths[k] * layout.inner * layout.bytes;
    if (parts[k] != nullptr) {
      for (int64_t o = 0; o < layout.outer; ++o) {
        char* in_whole = whole + o * row + offset;
        char* in_part = parts[k] + o * run;
        if (to_parts) {
          std::memcpy(in_part, in_whole, run);
        } else {
          std::memcpy(in_whole, in_part, run);
        }
      }
    }
    offset += run;
  }
}

}  // namespace gluon_dyn
