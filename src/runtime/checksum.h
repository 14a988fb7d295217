// Checks of exported files before they are read: the size and CRC-32 (zlib's, as Python's
// zlib.crc32 computes it) of a whole file against what was recorded when it was written.
//
// ExportChecksums reads the record every export writes beside the model (prefix-checksums.json,
// gluon_dyn/graph_files/checksums.py describes it) and checks each file the runtime reads against it:
// a file it does not list, or whose size or checksum differ, is refused, named, before MXNet or
// TVM parse it (a damaged parameter file would otherwise load and give other numbers). A model
// without the record is refused too, with the command that makes one for trusted files.
// tvm_bridge's plan also records each TVM library's size and CRC-32 (check_file).
#ifndef GLUON_DYN_RUNTIME_CHECKSUM_H_
#define GLUON_DYN_RUNTIME_CHECKSUM_H_

#include <cstdint>
#include <optional>
#include <string>

#include "json.h"

namespace gd {

// gd::Error naming `path` unless it has `bytes` bytes and CRC-32 `crc32`.
void check_file(const std::string &path, int64_t bytes, uint32_t crc32);

class ExportChecksums {
 public:
  // Reads prefix-checksums.json; gd::Error naming it when it is missing, unreadable, damaged
  // or of another version.
  explicit ExportChecksums(const std::string &prefix);

  // gd::Error naming `path` (a file beside the prefix) unless the record lists it with its
  // present size and checksum.
  void verify(const std::string &path) const;

 private:
  std::string prefix_, path_;
  std::optional<JsonValue> files_;  // {name after the prefix ("-symbol.json"): its checksum}
};

}  // namespace gd

#endif  // GLUON_DYN_RUNTIME_CHECKSUM_H_
