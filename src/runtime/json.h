// Reading the JSON files of an exported plan, with errors that name the file and the field.
#ifndef GLUON_DYN_RUNTIME_JSON_H_
#define GLUON_DYN_RUNTIME_JSON_H_

#include <tvm/ffi/any.h>

#include <cstdint>
#include <string>

namespace gd {

// A JSON value and where it is ("model-plan.json: steps[2].inputs"), for messages.
class JsonValue {
 public:
  JsonValue(tvm::ffi::Any value, std::string where)
      : value_(std::move(value)), where_(std::move(where)) {}

  // The parsed file; gd::Error naming it when it cannot be read or is not JSON.
  static JsonValue read_file(const std::string &path);

  bool has(const char *key) const;
  JsonValue operator[](const char *key) const;  // a field of an object
  JsonValue operator[](size_t index) const;     // an element of an array
  size_t size() const;                          // an array's length
  bool is_string() const;
  std::string string() const;
  int64_t integer() const;
  bool boolean() const;
  std::string dump() const;  // the value as JSON text
  const std::string &where() const { return where_; }

 private:
  [[noreturn]] void wrong(const char *expected) const;
  tvm::ffi::Any value_;
  std::string where_;
};

}  // namespace gd

#endif  // GLUON_DYN_RUNTIME_JSON_H_
