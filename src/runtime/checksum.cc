#include "checksum.h"

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include "error.h"
#include "json.h"

namespace gd {

namespace {

// The size and CRC-32 of a file's bytes.
struct FileChecksum {
  int64_t bytes = 0;
  uint32_t crc32 = 0;
};

// What gluon_dyn/graph_files/checksums.py writes (KIND, VERSION, SUFFIX there).
constexpr const char *kChecksumsKind = "gluon_dyn export checksums";
constexpr int64_t kChecksumsVersion = 1;
constexpr const char *kChecksumsSuffix = "-checksums.json";

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

// The file's size and CRC-32, read in blocks (parameter files can be large).
FileChecksum checksum_of(const std::string &path) {
  static const std::array<uint32_t, 256> table = make_table();
  std::ifstream file(path, std::ios::binary);
  if (!file) throw Error(path + ": cannot be opened (" + std::strerror(errno) + ")");
  std::vector<char> block(1 << 20);
  FileChecksum result;
  uint32_t crc = 0xFFFFFFFFu;
  while (file) {
    file.read(block.data(), static_cast<std::streamsize>(block.size()));
    std::streamsize got = file.gcount();
    for (std::streamsize i = 0; i < got; ++i) {
      crc = table[(crc ^ static_cast<unsigned char>(block[i])) & 0xFF] ^ (crc >> 8);
    }
    result.bytes += got;
  }
  if (file.bad()) throw Error(path + ": cannot be read");
  result.crc32 = crc ^ 0xFFFFFFFFu;
  return result;
}

std::string hex(uint32_t value) {
  char text[9];
  std::snprintf(text, sizeof(text), "%08x", value);
  return text;
}

std::string described(const FileChecksum &checksum) {
  return std::to_string(checksum.bytes) + " bytes, CRC-32 " + hex(checksum.crc32);
}

std::string base_name(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

void check_file(const std::string &path, int64_t bytes, uint32_t crc32) {
  FileChecksum found = checksum_of(path);
  if (found.bytes != bytes || found.crc32 != crc32) {
    throw Error(path + ": not the library the plan was exported with (" + described(found) +
                "; the plan expects " + described({bytes, crc32}) + "): truncated or damaged");
  }
}

ExportChecksums::ExportChecksums(const std::string &prefix)
    : prefix_(prefix), path_(prefix + kChecksumsSuffix) {
  if (!std::ifstream(path_)) {
    throw Error(path_ + ": cannot be opened (" + std::strerror(errno) + "); every export by "
                "gluon_dyn writes this record of its files' checksums, which the runtime checks "
                "before reading them. For files exported without it that you trust, "
                "`python -m gluon_dyn.export.record_checksums " + prefix + "` records them");
  }
  JsonValue record = JsonValue::read_file(path_);
  if (!record.has("kind") || !record["kind"].is_string() ||
      record["kind"].string() != kChecksumsKind) {
    throw Error(path_ + ": not a gluon_dyn checksums record (its \"kind\" is not \"" +
                kChecksumsKind + "\")");
  }
  int64_t version = record["version"].integer();
  if (version != kChecksumsVersion) {
    throw Error(path_ + ": checksums version " + std::to_string(version) + " is not the version " +
                "this runtime reads (" + std::to_string(kChecksumsVersion) + ")");
  }
  if (record["algorithm"].string() != "crc32") {
    throw Error(record["algorithm"].where() + ": \"" + record["algorithm"].string() +
                "\", where this runtime checks \"crc32\"");
  }
  files_.emplace(record["files"]);
}

void ExportChecksums::verify(const std::string &path) const {
  std::string base = base_name(prefix_) + "-", name = base_name(path);
  std::string suffix = name.compare(0, base.size(), base) == 0 ? name.substr(base.size() - 1) : "";
  if (suffix.empty() || !files_->has(suffix.c_str())) {
    throw Error(path + ": not among the files " + path_ + " records (left by another export?); "
                "export the model again");
  }
  JsonValue entry = (*files_)[suffix.c_str()];
  int64_t bytes = entry["bytes"].integer(), crc = entry["crc32"].integer();
  if (bytes < 0 || crc < 0 || crc > 0xFFFFFFFFLL) {
    throw Error(entry.where() + ": not a size and a CRC-32");
  }
  FileChecksum recorded{bytes, static_cast<uint32_t>(crc)}, found = checksum_of(path);
  if (found.bytes != recorded.bytes || found.crc32 != recorded.crc32) {
    throw Error(path + ": " + described(found) + " where " + path_ + " records " +
                described(recorded) + ": the file is truncated or damaged, or changed after "
                "export");
  }
}

}  // namespace gd
