#include "checksum.h"

#include <array>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

#include "error.h"

namespace gd {

namespace {

// CRC-32 with the reflected polynomial 0xEDB88320 (zlib's), one table lookup per byte.
std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t value = byte;
    for (int bit = 0; bit < 8; ++bit) value = (value >> 1) ^ (value & 1 ? 0xEDB88320u : 0u);
    table[byte] = value;
  }
  return table;
}

uint32_t crc32_of(const std::vector<char> &data) {
  static const std::array<uint32_t, 256> table = make_table();
  uint32_t crc = 0xFFFFFFFFu;
  for (char c : data) crc = table[(crc ^ static_cast<unsigned char>(c)) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

std::string hex(uint32_t value) {
  char text[9];
  std::snprintf(text, sizeof(text), "%08x", value);
  return text;
}

}  // namespace

void check_file(const std::string &path, int64_t bytes, uint32_t crc32) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw Error(path + ": cannot be opened");
  std::vector<char> data((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  uint32_t crc = crc32_of(data);
  if (static_cast<int64_t>(data.size()) != bytes || crc != crc32) {
    throw Error(path + ": not the library the plan was exported with (" +
                std::to_string(data.size()) + " bytes, checksum " + hex(crc) +
                "; the plan expects " + std::to_string(bytes) + " bytes, " + hex(crc32) +
                "): truncated or damaged");
  }
}

}  // namespace gd
