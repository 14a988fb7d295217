// A compiled TVM segment (tvm_bridge's prefix-segment<k>-tvm.so and its .json signature),
// called with the types it was compiled for.
#ifndef GLUON_DYN_RUNTIME_TVM_FUNCTION_H_
#define GLUON_DYN_RUNTIME_TVM_FUNCTION_H_

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/module.h>
#include <tvm/ffi/function.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "value.h"

namespace gd {

class TvmFunction {
 public:
  TvmFunction(const std::string &library, const std::string &signature);

  size_t num_inputs() const { return inputs_.size(); }
  size_t num_outputs() const { return num_outputs_; }
  // "" when `args` have the shapes and dtypes the function was compiled for (a symbolic dim
  // taking one size throughout), else what differs.
  std::string mismatch(const std::vector<Value *> &args) const;
  std::vector<tvm::ffi::Tensor> operator()(const std::vector<Value *> &args) const;

 private:
  struct Input {
    std::string name;
    std::vector<int64_t> dims;         // -1 where symbolic
    std::vector<std::string> symbols;  // the symbolic dims' names ("" where static)
    std::string dtype;
  };
  // What main_ takes after the data: the parameters as the library's prepare function
  // turned them (transposed, packed), computed on the first call. A deployed model's
  // parameters never change, so once is enough.
  const std::vector<tvm::ffi::Any> &prepared(const std::vector<Value *> &args) const;

  std::string library_;
  std::optional<tvm::ffi::Module> vm_;  // the virtual machine main_ runs in
  tvm::ffi::Function main_;
  std::optional<tvm::ffi::Function> prepare_;  // signature format 2: parameters prepared
  size_t num_data_ = 0;                        // with prepare_: the inputs that are data
  mutable std::once_flag prepared_once_;
  mutable std::vector<tvm::ffi::Any> prepared_;
  std::vector<Input> inputs_;
  size_t num_outputs_ = 0;
  bool returns_tuple_ = true;
};

}  // namespace gd

#endif  // GLUON_DYN_RUNTIME_TVM_FUNCTION_H_
