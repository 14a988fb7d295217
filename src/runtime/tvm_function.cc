#include "tvm_function.h"

#include <tvm/ffi/container/array.h>
#include <tvm/ffi/error.h>

#include <map>

#include "error.h"
#include "json.h"
#include "libraries.h"

namespace gd {

namespace {

// The signature formats tvm_bridge/runtime.py writes (MANIFEST_FORMAT there): 2 adds
// "num_data", the inputs before the parameters that kPrepareFunction prepares; 3 adds
// "external", the functions the library calls from the mxnet wheel's libraries.
constexpr int64_t kOldestSignatureFormat = 1, kSignatureFormat = 3;
constexpr const char *kPrepareFunction = "main_transform_params";
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
  int64_t format = manifest["format"].integer();
  if (format < kOldestSignatureFormat || format > kSignatureFormat) {
    throw Error(signature + ": signature format " + manifest["format"].dump() +
                ", this runtime reads formats " + std::to_string(kOldestSignatureFormat) +
                " to " + std::to_string(kSignatureFormat));
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
  bool prepares = manifest.has("num_data");
  if (prepares) {
    int64_t num_data = manifest["num_data"].integer();
    if (num_data < 0 || static_cast<size_t>(num_data) > inputs_.size()) {
      throw Error(signature + ": num_data " + std::to_string(num_data) + " but " +
                  std::to_string(inputs_.size()) + " inputs");
    }
    num_data_ = static_cast<size_t>(num_data);
  }

  load_tvm_runtime();
  if (manifest.has("external")) {
    JsonValue external = manifest["external"];
    for (size_t i = 0; i < external.size(); ++i) {
      std::string library = external[i]["library"].string();
      std::string symbol = external[i]["symbol"].string();
      try {
        load_external(library, symbol);
      } catch (const Error &error) {
        throw Error(external[i].where() + ": " + error.what());
      }
    }
  }
  try {
    tvm::ffi::Module executable = tvm::ffi::Module::LoadFromFile(library);
    vm_ = function_of(executable, "vm_load_executable", library)().cast<tvm::ffi::Module>();
    function_of(*vm_, "vm_initialization", library)(kCpu, 0, kPooledAllocator);
    main_ = function_of(*vm_, name.c_str(), library);
    if (prepares) prepare_ = function_of(*vm_, kPrepareFunction, library);
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

const std::vector<tvm::ffi::Any> &TvmFunction::prepared(const std::vector<Value *> &args) const {
  std::call_once(prepared_once_, [&] {
    std::vector<tvm::ffi::Tensor> parameters;
    for (size_t i = num_data_; i < args.size(); ++i) parameters.push_back(args[i]->tvm());
    tvm::ffi::Array<tvm::ffi::Tensor> packed(parameters.begin(), parameters.end());
    try {
      for (const tvm::ffi::Any &value :
           (*prepare_)(packed).cast<tvm::ffi::Array<tvm::ffi::Any>>()) {
        prepared_.push_back(value);
      }
    } catch (const tvm::ffi::Error &error) {
      throw Error(library_ + ": preparing the parameters: " + error.what());
    }
  });
  return prepared_;
}

std::vector<tvm::ffi::Tensor> TvmFunction::operator()(const std::vector<Value *> &args) const {
  std::vector<tvm::ffi::AnyView> views;
  views.reserve(args.size());
  if (prepare_.has_value()) {
    for (size_t i = 0; i < num_data_; ++i) views.emplace_back(args[i]->tvm());
    for (const tvm::ffi::Any &value : prepared(args)) views.emplace_back(value);
  } else {
    for (Value *arg : args) views.emplace_back(arg->tvm());
  }
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
