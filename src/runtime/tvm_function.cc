#include "tvm_function.h"

#include <tvm/ffi/container/array.h>
#include <tvm/ffi/error.h>

#include <map>

#include "error.h"
#include "json.h"
#include "libraries.h"

namespace gd {

namespace {

// The signature format tvm_bridge/runtime.py writes (MANIFEST_FORMAT there).
constexpr int64_t kSignatureFormat = 1;
// relax.VirtualMachine's CPU device and pooled allocator.
constexpr int kCpu = 1, kPooledAllocator = 2;

tvm::ffi::Function function_of(const tvm::ffi::Module &module, const char *name,
                               const std::string &library) {
  auto function = module->GetFunction(name, true);
  if (!function.has_value()) {
    throw Error(library + ": not a TVM Relax executable (it has no function " + name + ")");
  }
  return function.value();
}

}  // namespace

TvmFunction::TvmFunction(const std::string &library, const std::string &signature)
    : library_(library) {
  JsonValue manifest = JsonValue::read_file(signature);
  if (manifest["format"].integer() != kSignatureFormat) {
    throw Error(signature + ": signature format " + manifest["format"].dump() +
                ", this runtime reads format " + std::to_string(kSignatureFormat));
  }
  JsonValue inputs = manifest["inputs"];
  for (size_t i = 0; i < inputs.size(); ++i) {
    Input input{inputs[i]["name"].string(), {}, {}, inputs[i]["dtype"].string()};
    JsonValue shape = inputs[i]["shape"];
    for (size_t axis = 0; axis < shape.size(); ++axis) {
      bool symbolic = shape[axis].is_string();
      input.dims.push_back(symbolic ? -1 : shape[axis].integer());
      input.symbols.push_back(symbolic ? shape[axis].string() : "");
    }
    inputs_.push_back(std::move(input));
  }
  num_outputs_ = static_cast<size_t>(manifest["num_outputs"].integer());
  returns_tuple_ = !manifest.has("returns_tuple") || manifest["returns_tuple"].boolean();
  std::string name = manifest.has("function") ? manifest["function"].string() : "main";

  load_tvm_runtime();
  try {
    tvm::ffi::Module executable = tvm::ffi::Module::LoadFromFile(library);
    vm_ = function_of(executable, "vm_load_executable", library)().cast<tvm::ffi::Module>();
    function_of(*vm_, "vm_initialization", library)(kCpu, 0, kPooledAllocator);
    main_ = function_of(*vm_, name.c_str(), library);
  } catch (const tvm::ffi::Error &error) {
    throw Error(library + ": TVM cannot load it: " + error.what());
  }
}

std::string TvmFunction::mismatch(const std::vector<Value *> &args) const {
  std::map<std::string, int64_t> sizes;  // symbolic dim -> the size it took
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const Input &input = inputs_[i];
    std::vector<int64_t> shape = args[i]->shape();
    std::string dtype = args[i]->dtype();
    bool fits = dtype == input.dtype && shape.size() == input.dims.size();
    for (size_t axis = 0; fits && axis < shape.size(); ++axis) {
      if (input.dims[axis] >= 0) {
        fits = shape[axis] == input.dims[axis];
      } else {
        fits = sizes.emplace(input.symbols[axis], shape[axis]).first->second == shape[axis];
      }
    }
    if (!fits) {
      std::string compiled = input.dtype + " (";
      for (size_t axis = 0; axis < input.dims.size(); ++axis) {
        compiled += (axis ? ", " : "") + (input.dims[axis] >= 0 ? std::to_string(input.dims[axis])
                                                                : input.symbols[axis]);
      }
      compiled += input.dims.size() == 1 ? ",)" : ")";
      return input.name + ": compiled for " + compiled + ", got " + dtype + " " + shape_text(shape);
    }
  }
  return "";
}

std::vector<tvm::ffi::Tensor> TvmFunction::operator()(const std::vector<Value *> &args) const {
  std::vector<tvm::ffi::AnyView> views;
  views.reserve(args.size());
  for (Value *arg : args) views.emplace_back(arg->tvm());
  tvm::ffi::Any result;
  try {
    main_.CallPacked(views.data(), static_cast<int32_t>(views.size()), &result);
  } catch (const tvm::ffi::Error &error) {
    throw Error(library_ + ": " + error.what());
  }
  std::vector<tvm::ffi::Tensor> outputs;
  if (!returns_tuple_) {
    outputs.push_back(result.cast<tvm::ffi::Tensor>());
    return outputs;
  }
  for (const tvm::ffi::Any &output : result.cast<tvm::ffi::Array<tvm::ffi::Any>>()) {
    outputs.push_back(output.cast<tvm::ffi::Tensor>());
  }
  return outputs;
}

}  // namespace gd
