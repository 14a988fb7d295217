#include "model.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <fstream>
#include <map>
#include <optional>

#include "checksum.h"
#include "error.h"
#include "json.h"
#include "libraries.h"

namespace gd {

namespace {

// What tvm_bridge/deploy_loader.py writes and reads (PLAN_KIND, PLAN_VERSION there).
constexpr const char *kPlanKind = "tvm_bridge segmented plan";
constexpr int64_t kPlanVersion = 2;
// Bounds on inputs: MXNet's default build indexes arrays with int32.
constexpr size_t kMaxDims = 32;
constexpr int64_t kMaxElements = INT32_MAX;

// A TVM step met other types than it was compiled for: the call runs as the MXNet graph.
struct TypesDiffer {
  std::string what;
};

bool exists(const std::string &path) { return static_cast<bool>(std::ifstream(path)); }

std::string directory_of(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// MXNet's export names the forward's arguments "data" (one) or data0, data1, ...: those come
// first, in the forward's order; any other free input of the graph after them.
std::vector<std::string> data_inputs_of(const std::vector<std::string> &graph_inputs,
                                        const std::map<std::string, mx::NDArray> &params) {
  std::vector<std::pair<std::pair<int, long>, std::string>> keyed;
  for (size_t i = 0; i < graph_inputs.size(); ++i) {
    const std::string &name = graph_inputs[i];
    if (params.count(name)) continue;
    std::string suffix = name.compare(0, 4, "data") == 0 ? name.substr(4) : "x";
    bool numbered = !suffix.empty() && suffix.size() < 10 &&
                    std::all_of(suffix.begin(), suffix.end(), ::isdigit);
    if (suffix.empty() || numbered) {
      keyed.push_back({{0, suffix.empty() ? -1 : std::stol(suffix)}, name});
    } else {
      keyed.push_back({{1, static_cast<long>(i)}, name});
    }
  }
  std::sort(keyed.begin(), keyed.end());
  std::vector<std::string> names;
  for (auto &entry : keyed) names.push_back(entry.second);
  return names;
}

// "(3, 0)" -> {3, 0} (Gluon writes 0 for a dimension it did not know).
std::vector<int64_t> parse_shape(const std::string &text) {
  std::vector<int64_t> dims;
  for (size_t i = 0; i < text.size();) {
    if (std::isdigit(static_cast<unsigned char>(text[i]))) {
      size_t end = i;
      while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
      dims.push_back(std::stoll(text.substr(i, end - i)));
      i = end;
    } else {
      ++i;
    }
  }
  return dims;
}

// Every parameter the graph declares (Gluon records its shape in the variable's __shape__)
// must be in the .params file, with that shape.
void check_parameters(const mx::Symbol &symbol, const std::map<std::string, mx::NDArray> &params,
                      const std::string &symbol_path, const std::string &params_path) {
  auto attributes = symbol.variable_attributes();
  for (const std::string &name : symbol.input_names()) {
    auto declared = attributes.find(name);
    if (declared == attributes.end() || !declared->second.count("__shape__")) continue;
    auto param = params.find(name);
    if (param == params.end()) {
      throw Error(params_path + ": has no array for the parameter " + name + " of " + symbol_path);
    }
    std::vector<int64_t> want = parse_shape(declared->second.at("__shape__"));
    std::vector<int64_t> have = param->second.shape();
    bool fits = want.size() == have.size();
    for (size_t axis = 0; fits && axis < want.size(); ++axis) {
      fits = want[axis] == 0 || want[axis] == have[axis];
    }
    if (!fits) {
      throw Error(params_path + ": the parameter " + name + " has shape " + shape_text(have) +
                  " where " + symbol_path + " declares " + declared->second.at("__shape__"));
    }
  }
}

JsonValue read_plan(const std::string &path) {
  JsonValue manifest = JsonValue::read_file(path);
  if (!manifest.has("kind") || manifest["kind"].dump() != "\"" + std::string(kPlanKind) + "\"") {
    throw Error(path + ": not a tvm_bridge plan (its \"kind\" is not \"" + kPlanKind + "\")");
  }
  if (!manifest.has("version")) {
    throw Error(path + ": a plan without a version number, written before plans had one; "
                "export it again");
  }
  int64_t version = manifest["version"].integer();
  if (version != kPlanVersion) {
    throw Error(path + ": plan version " + std::to_string(version) + " is " +
                (version > kPlanVersion ? "newer than" : "older than") +
                " the version this runtime reads (" + std::to_string(kPlanVersion) +
                "); export it again with this version of gluon_dyn, or use the runtime of the "
                "version that wrote it");
  }
  return manifest;
}

// The name of the operator an MXNet message blames ("Error in operator <name>: ..."), or "".
std::string blamed_operator(const std::string &message) {
  const std::string marker = "Error in operator ";
  size_t start = message.find(marker);
  if (start == std::string::npos) return "";
  start += marker.size();
  size_t end = message.find_first_of(": \n", start);
  return message.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

}  // namespace

Model::Model(const std::string &prefix) {
  load_operator_library();
  // Every file is checked against the export's record before anything parses it.
  ExportChecksums checksums(prefix);
  std::string symbol_path = prefix + "-symbol.json", params_path = prefix + "-0000.params";
  std::string plan_path = prefix + "-plan.json";
  std::string directory = directory_of(prefix);
  std::optional<JsonValue> manifest;
  if (exists(plan_path)) {
    checksums.verify(plan_path);
    manifest = read_plan(plan_path);
    symbol_path = directory + "/" + (*manifest)["graph"].string();
    params_path = directory + "/" + (*manifest)["parameters"].string();
  }
  checksums.verify(symbol_path);
  checksums.verify(params_path);
  mx::Symbol symbol = mx::Symbol::from_file(symbol_path);
  std::map<std::string, mx::NDArray> params = mx::load_params(params_path);
  check_parameters(symbol, params, symbol_path, params_path);
  std::vector<std::string> graph_inputs = symbol.input_names();
  if (manifest) {
    JsonValue names = (*manifest)["data_inputs"];
    for (size_t i = 0; i < names.size(); ++i) input_names_.push_back(names[i].string());
  } else {
    input_names_ = data_inputs_of(graph_inputs, params);
  }
  std::map<std::string, size_t> slots;
  for (const std::string &name : input_names_) {
    slots[name] = values_.size();
    values_.emplace_back();
  }
  for (auto &param : params) {
    if (!slots.count(param.first)) {
      slots[param.first] = values_.size();
      values_.push_back(Value::of(std::move(param.second)));
    }
  }
  num_fixed_ = values_.size();
  num_outputs_ = static_cast<size_t>(symbol.num_outputs());
  std::map<std::string, size_t> graph_slots = slots;
  graph_.num_slots = num_fixed_;
  graph_.steps.push_back(graph_step(std::move(symbol), symbol_path, false, graph_slots, graph_));
  graph_.outputs = graph_.steps.back().writes;
  if (manifest) {
    plan_ = std::make_unique<Program>();
    plan_->num_slots = num_fixed_;
    load_plan(*manifest, directory, checksums, slots);
  }
  values_.resize(std::max(graph_.num_slots, plan_ ? plan_->num_slots : 0));
}

Model::Step Model::graph_step(mx::Symbol symbol, const std::string &origin, bool static_shape,
                              std::map<std::string, size_t> &slots, Program &program) {
  Step step;
  step.origin = origin;
  for (const std::string &name : symbol.input_names()) {
    auto slot = slots.find(name);
    if (slot == slots.end()) {
      throw Error(origin + ": reads " + name +
                  ", which is neither a data input, a parameter nor an earlier step's output");
    }
    step.reads.push_back(slot->second);
  }
  for (int i = 0; i < symbol.num_outputs(); ++i) step.writes.push_back(program.num_slots++);
  step.graph = std::make_unique<mx::CachedOp>(symbol, static_shape);
  step.symbol = std::make_unique<mx::Symbol>(std::move(symbol));
  return step;
}

void Model::load_plan(const JsonValue &manifest, const std::string &directory,
                      const ExportChecksums &checksums, std::map<std::string, size_t> &slots) {
  bool static_shape = manifest["static_shape"].boolean();
  JsonValue steps = manifest["steps"];
  for (size_t k = 0; k < steps.size(); ++k) {
    JsonValue entry = steps[k];
    std::string backend = entry["backend"].string();
    Step step;
    if (backend == "mxnet") {
      step = graph_step(mx::Symbol::from_json(entry["symbol"].dump(), entry["symbol"].where()),
                        entry.where(), static_shape, slots, *plan_);
    } else if (backend == "tvm") {
      step.origin = directory + "/" + entry["library"].string();
      std::string signature = directory + "/" + entry["signature"].string();
      checksums.verify(step.origin);
      checksums.verify(signature);
      check_file(step.origin, entry["library_bytes"].integer(),
                 static_cast<uint32_t>(entry["library_crc32"].integer()));
      step.function = std::make_unique<TvmFunction>(step.origin, signature);
      JsonValue inputs = entry["inputs"];
      if (inputs.size() != step.function->num_inputs()) {
        throw Error(inputs.where() + ": " + std::to_string(inputs.size()) + " inputs, but " +
                    step.origin + " takes " + std::to_string(step.function->num_inputs()));
      }
      for (size_t i = 0; i < inputs.size(); ++i) {
        auto slot = slots.find(inputs[i].string());
        if (slot == slots.end()) {
          throw Error(inputs[i].where() + ": " + inputs[i].string() +
                      " is neither a data input, a parameter nor an earlier step's output");
        }
        step.reads.push_back(slot->second);
        if (slot->second >= input_names_.size() && slot->second < num_fixed_) {
          values_[slot->second].copy_for_tvm();
        }
      }
      for (size_t i = 0; i < step.function->num_outputs(); ++i) {
        step.writes.push_back(plan_->num_slots++);
      }
    } else {
      throw Error(entry["backend"].where() + ": unknown backend \"" + backend +
                  "\" (expected \"tvm\" or \"mxnet\")");
    }
    JsonValue outputs = entry["outputs"];
    if (outputs.size() != step.writes.size()) {
      throw Error(outputs.where() + ": names " + std::to_string(outputs.size()) +
                  " outputs, but the step gives " + std::to_string(step.writes.size()));
    }
    for (size_t i = 0; i < outputs.size(); ++i) slots[outputs[i].string()] = step.writes[i];
    plan_->steps.push_back(std::move(step));
  }
  JsonValue outputs = manifest["outputs"];
  if (outputs.size() != num_outputs_) {
    throw Error(outputs.where() + ": " + std::to_string(outputs.size()) + " outputs, but the "
                "graph has " + std::to_string(num_outputs_));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    auto slot = slots.find(outputs[i].string());
    if (slot == slots.end()) {
      throw Error(outputs[i].where() + ": " + outputs[i].string() + " is computed by no step");
    }
    plan_->outputs.push_back(slot->second);
  }
}

std::vector<std::vector<int64_t>> Model::checked_shapes(const std::vector<Input> &inputs) const {
  if (inputs.size() != input_names_.size()) {
    std::string names;
    for (const std::string &name : input_names_) names += (names.empty() ? "" : ", ") + name;
    throw Error("the model takes " + std::to_string(input_names_.size()) +
                (input_names_.size() == 1 ? " input (" : " inputs (") + names + "), got " +
                std::to_string(inputs.size()));
  }
  std::vector<std::vector<int64_t>> shapes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Input &input = inputs[i];
    std::string where = "input " + input_names_[i];
    if (input.ndim < 1 || static_cast<size_t>(input.ndim) > kMaxDims) {
      throw Error(where + ": " + std::to_string(input.ndim) + " dimensions; inputs have 1 to " +
                  std::to_string(kMaxDims));
    }
    if (input.dims == nullptr) throw Error(where + ": its shape is NULL");
    if (input.data == nullptr) throw Error(where + ": its data is NULL");
    std::vector<int64_t> shape(input.dims, input.dims + input.ndim);
    int64_t elements = 1;
    for (int64_t dim : shape) {
      if (dim < 1) {
        throw Error(where + ": shape " + shape_text(shape) + " has a dimension below 1");
      }
      if (dim > kMaxElements / elements) {
        throw Error(where + ": shape " + shape_text(shape) + " has more than " +
                    std::to_string(kMaxElements) + " elements");
      }
      elements *= dim;
    }
    shapes.push_back(std::move(shape));
  }
  return shapes;
}

void Model::execute(Program &program) {
  for (Step &step : program.steps) {
    std::vector<Value *> args;
    for (size_t slot : step.reads) args.push_back(&values_[slot]);
    if (step.function) {
      std::string difference = step.function->mismatch(args);
      if (!difference.empty()) throw TypesDiffer{step.origin + ": " + difference};
      std::vector<tvm::ffi::Tensor> outputs = (*step.function)(args);
      for (size_t i = 0; i < step.writes.size(); ++i) {
        values_[step.writes[i]] = Value::of(std::move(outputs[i]));
      }
      continue;
    }
    std::vector<NDArrayHandle> handles;
    for (Value *arg : args) handles.push_back(arg->mxnet());
    std::vector<mx::NDArray> outputs = step.graph->invoke(handles);
    for (size_t i = 0; i < step.writes.size(); ++i) {
      values_[step.writes[i]] = Value::of(std::move(outputs[i]));
    }
  }
}

void Model::clear_outputs() {
  outputs_.clear();
  kept_.clear();
}

void Model::run(const std::vector<Input> &inputs) {
  clear_outputs();
  std::vector<std::vector<int64_t>> shapes = checked_shapes(inputs);
  for (size_t i = 0; i < inputs.size(); ++i) values_[i] = Value::borrow(inputs[i].data, shapes[i]);
  try {
    Program *program = &graph_;
    if (plan_) {
      try {
        execute(*plan_);
        program = plan_.get();
      } catch (const TypesDiffer &difference) {
        last_difference_ = difference.what;
      }
    }
    if (program == &graph_) execute(graph_);
    for (size_t slot : program->outputs) {
      Value &value = values_[slot];
      const float *data = value.float_data();
      outputs_.push_back({value.shape(), data});
      kept_.push_back(value);
    }
    ++(program == &graph_ ? graph_runs_ : plan_runs_);
  } catch (const mx::GraphError &error) {
    clear_outputs();
    std::fill(values_.begin() + num_fixed_, values_.end(), Value());
    throw Error(rejected(shapes, error.what()));
  } catch (...) {
    clear_outputs();
    std::fill(values_.begin() + num_fixed_, values_.end(), Value());
    throw;
  }
  std::fill(values_.begin(), values_.begin() + input_names_.size(), Value());
  std::fill(values_.begin() + num_fixed_, values_.end(), Value());
}

std::string Model::rejected(const std::vector<std::vector<int64_t>> &shapes,
                            const std::string &message) const {
  // Name the data inputs the operator MXNet blames reads (all of them when it is not found at
  // the graph's top level).
  std::vector<std::string> reads;
  std::string blamed = blamed_operator(message);
  if (!blamed.empty()) reads = graph_.steps.front().symbol->inputs_of_node(blamed);
  std::string named;
  size_t count = 0;
  for (size_t i = 0; i < input_names_.size(); ++i) {
    if (!reads.empty() && std::find(reads.begin(), reads.end(), input_names_[i]) == reads.end()) {
      continue;
    }
    named += (count++ ? ", " : "") + input_names_[i] + " of shape " + shape_text(shapes[i]);
  }
  if (count == 0) return "the graph rejects the inputs: " + message;
  return std::string("the graph rejects input") + (count > 1 ? "s " : " ") + named + ": " + message;
}

std::string Model::report() const {
  std::string text = std::to_string(plan_runs_) + " runs as the plan, " +
                     std::to_string(graph_runs_) + " as the MXNet graph";
  if (!last_difference_.empty()) {
    text += " (the last difference from the plan's types: " + last_difference_ + ")";
  }
  return text;
}

}  // namespace gd
