#include "json.h"

#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/map.h>
#include <tvm/ffi/extra/json.h>
#include <tvm/ffi/string.h>

#include <fstream>
#include <sstream>

#include "error.h"

namespace gd {

namespace json = tvm::ffi::json;

JsonValue JsonValue::read_file(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw Error(path + ": cannot be opened");
  std::stringstream text;
  text << file.rdbuf();
  if (file.bad()) throw Error(path + ": cannot be read");
  tvm::ffi::String error;
  json::Value value = json::Parse(text.str(), &error);
  if (!error.empty()) throw Error(path + ": not valid JSON: " + std::string(error));
  return JsonValue(value, path);
}

void JsonValue::wrong(const char *expected) const {
  throw Error(where_ + ": expected " + expected + ", found " + dump());
}

bool JsonValue::has(const char *key) const {
  auto object = value_.as<json::Object>();
  return object.has_value() && object.value().count(tvm::ffi::String(key));
}

JsonValue JsonValue::operator[](const char *key) const {
  auto object = value_.as<json::Object>();
  if (!object.has_value()) wrong("an object");
  auto found = object.value().find(tvm::ffi::String(key));
  if (found == object.value().end()) throw Error(where_ + ": no field \"" + key + "\"");
  std::string where = where_ + (where_.find(": ") == std::string::npos ? ": " : ".") + key;
  return JsonValue((*found).second, where);
}

JsonValue JsonValue::operator[](size_t index) const {
  if (index >= size()) throw Error(where_ + ": no element " + std::to_string(index));
  return JsonValue(value_.as<json::Array>().value()[index],
                   where_ + "[" + std::to_string(index) + "]");
}

size_t JsonValue::size() const {
  auto array = value_.as<json::Array>();
  if (!array.has_value()) wrong("an array");
  return array.value().size();
}

bool JsonValue::is_string() const { return value_.as<tvm::ffi::String>().has_value(); }

std::string JsonValue::string() const {
  auto text = value_.as<tvm::ffi::String>();
  if (!text.has_value()) wrong("a string");
  return std::string(text.value());
}

int64_t JsonValue::integer() const {
  auto number = value_.as<int64_t>();
  if (!number.has_value()) wrong("an integer");
  return number.value();
}

bool JsonValue::boolean() const {
  auto flag = value_.as<bool>();
  if (!flag.has_value()) wrong("true or false");
  return flag.value();
}

std::string JsonValue::dump() const { return std::string(json::Stringify(value_)); }

}  // namespace gd
