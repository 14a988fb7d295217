#include "mxnet.h"

#include <dlfcn.h>

#include <utility>

#include "borrowed.h"

// The absolute path given by the Makefile.
#ifndef GD_MXNET_LIBRARY
#error "GD_MXNET_LIBRARY (the path of the mxnet wheel's libmxnet.so) must be defined"
#endif

namespace gd {
namespace mx {

namespace {

Api load_api() {
  void *library = dlopen(GD_MXNET_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) throw Error(std::string("cannot load MXNet: ") + dlerror());
  Api table;
#define GD_MXNET_LOOKUP(name)                                                       \
  table.name = reinterpret_cast<decltype(table.name)>(dlsym(library, #name));      \
  if (table.name == nullptr) throw Error(GD_MXNET_LIBRARY ": has no function " #name);
  GD_MXNET_FUNCTIONS(GD_MXNET_LOOKUP)
#undef GD_MXNET_LOOKUP
  // MXNet 1.9.1 frees an invalid pointer while preparing some graphs (an unrolled LSTM's)
  // unless its operator registry was listed first, as `import mxnet` does.
  uint32_t count = 0;
  const char **names = nullptr;
  if (table.MXListAllOpNames(&count, &names) != 0) {
    throw Error(std::string("MXNet: ") + table.MXGetLastError());
  }
  return table;
}

}  // namespace

const Api &api() {
  static const Api table = load_api();  // a load that threw is tried again on the next use
  return table;
}

std::string last_error() {
  // Without the stack trace of MXNet's own source lines that MXNet appends.
  std::string message = api().MXGetLastError();
  message = message.substr(0, message.find("\nStack trace:"));
  message.erase(message.find_last_not_of(" \n") + 1);
  return message;
}

void check(int status, const std::string &context) {
  if (status != 0) throw Error(context + ": " + last_error());
}

std::string dtype_name(int dtype) {
  static const char *const kNames[] = {"float32", "float64", "float16", "uint8", "int32",
                                       "int8",    "int64",   "bool",    "int16", "uint16",
                                       "uint32",  "uint64",  "bfloat16"};
  if (dtype >= 0 && dtype < static_cast<int>(sizeof(kNames) / sizeof(kNames[0]))) {
    return kNames[dtype];
  }
  return "dtype code " + std::to_string(dtype);
}

NDArray &NDArray::operator=(NDArray &&other) noexcept {
  if (this != &other) {
    if (handle_) api().MXNDArrayFree(handle_);
    handle_ = other.release();
  }
  return *this;
}

NDArray::~NDArray() {
  if (handle_) api().MXNDArrayFree(handle_);
}

NDArrayHandle NDArray::release() {
  NDArrayHandle handle = handle_;
  handle_ = nullptr;
  return handle;
}

NDArray NDArray::borrow(const float *data, const std::vector<int64_t> &shape) {
  return from_dlpack(borrow_floats(data, shape));
}

NDArray NDArray::from_dlpack(DLManagedTensor *tensor) {
  NDArrayHandle handle = nullptr;
  if (api().MXNDArrayFromDLPackEx(tensor, false, &handle) != 0) {
    tensor->deleter(tensor);
    throw Error("passing an array to MXNet: " + last_error());
  }
  return NDArray(handle);
}

void NDArray::wait() const {
  if (api().MXNDArrayWaitToRead(handle_) != 0) throw GraphError(last_error());
}

std::vector<int64_t> NDArray::shape() const {
  int ndim = 0;
  const int *dims = nullptr;
  check(api().MXNDArrayGetShapeEx(handle_, &ndim, &dims), "reading an array's shape");
  return std::vector<int64_t>(dims, dims + (ndim > 0 ? ndim : 0));
}

int NDArray::dtype() const {
  int dtype = -1;
  check(api().MXNDArrayGetDType(handle_, &dtype), "reading an array's dtype");
  return dtype;
}

void *NDArray::data() const {
  void *data = nullptr;
  check(api().MXNDArrayGetData(handle_, &data), "reading an array's data");
  return data;
}

DLManagedTensor *NDArray::to_dlpack() const {
  wait();
  data();  // back to the plain layout before the view is taken
  DLManagedTensorHandle tensor = nullptr;
  check(api().MXNDArrayToDLPack(handle_, &tensor), "viewing an MXNet array through DLPack");
  return static_cast<DLManagedTensor *>(tensor);
}

Symbol Symbol::from_file(const std::string &path) {
  SymbolHandle handle = nullptr;
  check(api().MXSymbolCreateFromFile(path.c_str(), &handle), path);
  return Symbol(handle);
}

Symbol Symbol::from_json(const std::string &json, const std::string &origin) {
  SymbolHandle handle = nullptr;
  check(api().MXSymbolCreateFromJSON(json.c_str(), &handle), origin);
  return Symbol(handle);
}

Symbol::~Symbol() {
  if (handle_) api().MXSymbolFree(handle_);
}

namespace {

std::vector<std::string> strings(uint32_t size, const char **array) {
  return std::vector<std::string>(array, array + size);
}

std::vector<std::string> input_names_of(SymbolHandle handle) {
  nn_uint size = 0;
  const char **names = nullptr;
  check(api().NNSymbolListInputNames(handle, 0, &size, &names), "listing a graph's inputs");
  return strings(size, names);
}

}  // namespace

std::vector<std::string> Symbol::input_names() const { return input_names_of(handle_); }

int Symbol::num_outputs() const {
  uint32_t count = 0;
  check(api().MXSymbolGetNumOutputs(handle_, &count), "counting a graph's outputs");
  return static_cast<int>(count);
}

std::map<std::string, std::map<std::string, std::string>> Symbol::variable_attributes() const {
  uint32_t size = 0;
  const char **pairs = nullptr;
  check(api().MXSymbolListAttr(handle_, &size, &pairs), "reading a graph's attributes");
  std::map<std::string, std::map<std::string, std::string>> attributes;
  for (uint32_t i = 0; i < size; ++i) {
    // Keys are "<node name>$<attribute>".
    std::string key = pairs[2 * i];
    size_t dollar = key.rfind('$');
    if (dollar != std::string::npos) {
      attributes[key.substr(0, dollar)][key.substr(dollar + 1)] = pairs[2 * i + 1];
    }
  }
  return attributes;
}

std::vector<std::string> Symbol::inputs_of_node(const std::string &node) const {
  SymbolHandle internals = nullptr;
  check(api().MXSymbolGetInternals(handle_, &internals), "listing a graph's nodes");
  Symbol all(internals);
  uint32_t size = 0;
  const char **outputs = nullptr;
  check(api().MXSymbolListOutputs(internals, &size, &outputs), "listing a graph's nodes");
  const std::string prefix = node + "_output";
  for (uint32_t i = 0; i < size; ++i) {
    if (std::string(outputs[i]).compare(0, prefix.size(), prefix) == 0) {
      SymbolHandle output = nullptr;
      check(api().MXSymbolGetOutput(internals, i, &output), "reading a graph's node");
      Symbol owned(output);
      return input_names_of(output);
    }
  }
  return {};
}

CachedOp::CachedOp(const Symbol &symbol, bool static_shape) {
  const char *keys[] = {"static_alloc", "static_shape"};
  const char *values[] = {"true", static_shape ? "true" : "false"};
  check(api().MXCreateCachedOpEX(symbol.get(), 2, keys, values, &handle_, false),
        "preparing the graph to run");
}

CachedOp::~CachedOp() {
  if (handle_) api().MXFreeCachedOp(handle_);
}

std::vector<NDArray> CachedOp::invoke(std::vector<NDArrayHandle> &inputs) const {
  int num_outputs = 0;
  NDArrayHandle *outputs = nullptr;
  const int *storage_types = nullptr;
  if (api().MXInvokeCachedOpEx(handle_, static_cast<int>(inputs.size()), inputs.data(), &num_outputs,
                         &outputs, &storage_types) != 0) {
    throw GraphError(last_error());
  }
  std::vector<NDArray> result;
  result.reserve(num_outputs);
  for (int i = 0; i < num_outputs; ++i) result.emplace_back(outputs[i]);
  return result;
}

std::map<std::string, NDArray> load_params(const std::string &path) {
  uint32_t count = 0, name_count = 0;
  NDArrayHandle *arrays = nullptr;
  const char **names = nullptr;
  check(api().MXNDArrayLoad(path.c_str(), &count, &arrays, &name_count, &names), path);
  std::vector<NDArray> owned;
  for (uint32_t i = 0; i < count; ++i) owned.emplace_back(arrays[i]);
  if (name_count != count) {
    throw Error(path + ": holds " + std::to_string(count) + " arrays but " +
                std::to_string(name_count) + " names; MXNet's export saves a name per array");
  }
  std::map<std::string, NDArray> params;
  for (uint32_t i = 0; i < count; ++i) {
    std::string name = names[i];
    if (name.compare(0, 4, "arg:") == 0 || name.compare(0, 4, "aux:") == 0) name = name.substr(4);
    params[name] = std::move(owned[i]);
  }
  return params;
}

}  // namespace mx
}  // namespace gd
