// The CRC-32 that Python's zlib.crc32 computes, of a whole file: tvm_bridge's plan records it
// for each TVM library, which is checked before the library is loaded (the dynamic loader can
// crash on a truncated or damaged one).
#ifndef GLUON_DYN_RUNTIME_CHECKSUM_H_
#define GLUON_DYN_RUNTIME_CHECKSUM_H_

#include <cstdint>
#include <string>

namespace gd {

// gd::Error naming `path` unless it has `bytes` bytes and CRC-32 `crc32`.
void check_file(const std::string &path, int64_t bytes, uint32_t crc32);

}  // namespace gd

#endif  // GLUON_DYN_RUNTIME_CHECKSUM_H_
