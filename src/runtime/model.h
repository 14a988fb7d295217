// An exported model: MXNet's graph and parameters, and, when tvm_bridge exported one, the plan
// that runs it as TVM and MXNet steps.
#ifndef GLUON_DYN_RUNTIME_MODEL_H_
#define GLUON_DYN_RUNTIME_MODEL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checksum.h"
#include "json.h"
#include "mxnet.h"
#include "tvm_function.h"
#include "value.h"

namespace gd {

// A float32 input as the caller gives it: data, and `ndim` dims (checked by Model::run).
struct Input {
  const float *data;
  int ndim;
  const int64_t *dims;
};

struct Output {
  std::vector<int64_t> shape;
  const float *data;
};

class Model {
 public:
  explicit Model(const std::string &prefix);

  const std::vector<std::string> &input_names() const { return input_names_; }
  size_t num_outputs() const { return num_outputs_; }
  // Runs the model; gd::Error naming the input or file at fault. Outputs are those of the
  // last successful run; none after a failure.
  void run(const std::vector<Input> &inputs);
  const std::vector<Output> &outputs() const { return outputs_; }
  // Ends the last run's outputs (a run does this first).
  void clear_outputs();
  // How the runs went: calls served by the plan, calls run as the MXNet graph since their
  // types differed from the plan's (with the last difference).
  std::string report() const;

 private:
  // An MXNet graph run as a CachedOp, or a TVM function; with the slots it reads and writes.
  struct Step {
    std::string origin;  // the file it comes from, for messages
    std::unique_ptr<mx::Symbol> symbol;
    std::unique_ptr<mx::CachedOp> graph;
    std::unique_ptr<TvmFunction> function;
    std::vector<size_t> reads, writes;
  };
  // Steps in order over numbered value slots: the data inputs, then the parameters, then the
  // steps' outputs.
  struct Program {
    std::vector<Step> steps;
    std::vector<size_t> outputs;
    size_t num_slots = 0;
  };

  void load_plan(const JsonValue &manifest, const std::string &directory,
                 const ExportChecksums &checksums, std::map<std::string, size_t> &slots);
  Step graph_step(mx::Symbol symbol, const std::string &origin, bool static_shape,
                  std::map<std::string, size_t> &slots, Program &program);
  // The inputs' shapes, once each input is checked.
  std::vector<std::vector<int64_t>> checked_shapes(const std::vector<Input> &inputs) const;
  void execute(Program &program);
  std::string rejected(const std::vector<std::vector<int64_t>> &shapes,
                       const std::string &message) const;

  std::vector<std::string> input_names_;
  size_t num_outputs_ = 0;
  std::vector<Value> values_;  // per slot; the parameters' stay, the others last one call
  size_t num_fixed_ = 0;       // data inputs and parameters
  Program graph_;              // the whole MXNet graph
  std::unique_ptr<Program> plan_;
  std::vector<Value> kept_;  // the outputs' values, alive until the next run
  std::vector<Output> outputs_;
  size_t plan_runs_ = 0, graph_runs_ = 0;
  std::string last_difference_;
};

}  // namespace gd

#endif  // GLUON_DYN_RUNTIME_MODEL_H_
