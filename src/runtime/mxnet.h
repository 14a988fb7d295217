// MXNet's C API as owning C++ handles: arrays, symbols, CachedOps, .params files.
// Every failing call throws gd::Error with MXNet's message after the caller's context.
#ifndef GLUON_DYN_RUNTIME_MXNET_H_
#define GLUON_DYN_RUNTIME_MXNET_H_

#include <dlpack/dlpack.h>
#include <mxnet/c_api.h>
#include <nnvm/c_api.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "error.h"

namespace gd {
namespace mx {

// MXNet's C API, taken from libmxnet.so opened with RTLD_LOCAL: libmxnet exports C++
// symbols (standard-library templates, lib_api's classes) that would otherwise take the place
// of the program's own and of gluon_dyn's operator library (whose loading crashed on them).
#define GD_MXNET_FUNCTIONS(X)                                                                 \
  X(MXGetLastError) X(MXLoadLib) X(MXNDArrayFree) X(MXNDArrayFromDLPackEx)                  \
  X(MXNDArrayWaitToRead) X(MXNDArrayGetShapeEx) X(MXNDArrayGetDType) X(MXNDArrayGetData)    \
  X(MXNDArrayToDLPack) X(MXNDArrayLoad) X(MXSymbolCreateFromFile) X(MXSymbolCreateFromJSON) \
  X(MXSymbolFree) X(NNSymbolListInputNames) X(MXSymbolGetNumOutputs) X(MXSymbolListAttr)    \
  X(MXSymbolGetInternals) X(MXSymbolListOutputs) X(MXSymbolGetOutput)                       \
  X(MXCreateCachedOpEX) X(MXFreeCachedOp) X(MXInvokeCachedOpEx) X(MXListAllOpNames)

struct Api {
#define GD_MXNET_POINTER(name) decltype(&::name) name;
  GD_MXNET_FUNCTIONS(GD_MXNET_POINTER)
#undef GD_MXNET_POINTER
};

// The table, loaded on first use (gd::Error naming libmxnet.so when it cannot be).
const Api &api();

// MXNet's code for float32 (mshadow::kFloat32).
constexpr int kFloat32 = 0;

// MXNet's message about the calling thread's last failure.
std::string last_error();

// Throws gd::Error("<context>: <MXNet's last error>") when `status` is not 0.
void check(int status, const std::string &context);

// An error MXNet met running a graph (a shape it rejects, a failing operator).
class GraphError : public Error {
 public:
  using Error::Error;
};

// The name MXNet (and numpy) give a dtype code, e.g. "int32".
std::string dtype_name(int dtype);

class NDArray {
 public:
  NDArray() = default;
  explicit NDArray(NDArrayHandle handle) : handle_(handle) {}
  NDArray(NDArray &&other) noexcept : handle_(other.release()) {}
  NDArray &operator=(NDArray &&other) noexcept;
  NDArray(const NDArray &) = delete;
  NDArray &operator=(const NDArray &) = delete;
  ~NDArray();

  // A float32 array reading `data` (dense, row-major) in place; `data` must outlive every
  // computation reading the array.
  static NDArray borrow(const float *data, const std::vector<int64_t> &shape);
  // An array taking over a DLPack tensor (MXNet calls its deleter when done).
  static NDArray from_dlpack(DLManagedTensor *tensor);

  NDArrayHandle get() const { return handle_; }
  NDArrayHandle release();
  // Waits for the computation writing the array; throws (GraphError) the error it met, if any.
  void wait() const;
  std::vector<int64_t> shape() const;
  int dtype() const;
  // The data in the plain row-major layout (MXNet reorders oneDNN-blocked arrays first).
  void *data() const;
  // A DLPack view of the finished, plain-layout array; the caller owns it.
  DLManagedTensor *to_dlpack() const;

 private:
  NDArrayHandle handle_ = nullptr;
};

class Symbol {
 public:
  static Symbol from_file(const std::string &path);
  static Symbol from_json(const std::string &json, const std::string &origin);
  Symbol(Symbol &&other) noexcept : handle_(other.handle_) { other.handle_ = nullptr; }
  Symbol(const Symbol &) = delete;
  Symbol &operator=(const Symbol &) = delete;
  ~Symbol();

  SymbolHandle get() const { return handle_; }
  // Every input (arguments and auxiliary states), in the order a CachedOp takes them.
  std::vector<std::string> input_names() const;
  int num_outputs() const;
  // Attributes of the graph's variables: {variable name: {key: value}}.
  std::map<std::string, std::map<std::string, std::string>> variable_attributes() const;
  // The inputs the node named `node` reads, directly or not; empty when no such node is at
  // the top level of the graph (a node inside a control-flow subgraph).
  std::vector<std::string> inputs_of_node(const std::string &node) const;

 private:
  explicit Symbol(SymbolHandle handle) : handle_(handle) {}
  SymbolHandle handle_ = nullptr;
};

class CachedOp {
 public:
  // static_shape: MXNet plans for one set of input shapes (planning again for another).
  CachedOp(const Symbol &symbol, bool static_shape);
  CachedOp(CachedOp &&other) noexcept : handle_(other.handle_) { other.handle_ = nullptr; }
  CachedOp(const CachedOp &) = delete;
  CachedOp &operator=(const CachedOp &) = delete;
  ~CachedOp();

  // Runs the graph on `inputs` (in Symbol::input_names order); the outputs may still be
  // being computed (NDArray::wait). GraphError when MXNet rejects the inputs.
  std::vector<NDArray> invoke(std::vector<NDArrayHandle> &inputs) const;

 private:
  CachedOpHandle handle_ = nullptr;
};

// The arrays of an MXNet .params file by name, without MXNet's "arg:"/"aux:" prefixes.
std::map<std::string, NDArray> load_params(const std::string &path);

}  // namespace mx
}  // namespace gd

#endif  // GLUON_DYN_RUNTIME_MXNET_H_
