// The C API (gluon_dyn_runtime.h): arguments checked, every C++ error turned into a message
// for gd_last_error() and a NULL / -1 return.
#include <tvm/ffi/error.h>

#include <memory>
#include <new>
#include <string>
#include <vector>

#include "error.h"
#include "gluon_dyn_runtime.h"
#include "model.h"

struct gd_model {
  std::unique_ptr<gd::Model> model;
  std::string report;
};

namespace {

thread_local std::string last_error;

// Runs `body`; on an exception records "<what>: <message>" and returns `failed`.
template <typename Result, typename Body>
Result guarded(const char *what, Result failed, Body body) {
  try {
    last_error.clear();
    return body();
  } catch (const gd::Error &error) {
    last_error = std::string(what) + ": " + error.what();
  } catch (const tvm::ffi::Error &error) {
    last_error = std::string(what) + ": TVM: " + error.what();
  } catch (const std::bad_alloc &) {
    last_error = std::string(what) + ": out of memory";
  } catch (const std::exception &error) {
    last_error = std::string(what) + ": " + error.what();
  } catch (...) {
    last_error = std::string(what) + ": an unknown C++ exception";
  }
  return failed;
}

const gd::Model &checked(const gd_model *m) {
  if (m == nullptr) throw gd::Error("the model is NULL");
  return *m->model;
}

// Output i of the last successful run, or an error saying why there is none.
const gd::Output &output(const gd_model *m, int i) {
  const std::vector<gd::Output> &outputs = checked(m).outputs();
  if (outputs.empty()) throw gd::Error("no outputs: the model has not run successfully since it "
                                       "was loaded or since its last failed run");
  if (i < 0 || static_cast<size_t>(i) >= outputs.size()) {
    throw gd::Error("output " + std::to_string(i) + " does not exist (the model has " +
                    std::to_string(outputs.size()) + ")");
  }
  return outputs[i];
}

}  // namespace

extern "C" {

gd_model *gd_model_load(const char *prefix) {
  return guarded("gd_model_load", static_cast<gd_model *>(nullptr), [&] {
    if (prefix == nullptr) throw gd::Error("the prefix is NULL");
    auto handle = std::make_unique<gd_model>();
    handle->model = std::make_unique<gd::Model>(prefix);
    return handle.release();
  });
}

const char *gd_last_error(void) { return last_error.c_str(); }

int gd_model_num_inputs(const gd_model *m) {
  return guarded("gd_model_num_inputs", -1,
                 [&] { return static_cast<int>(checked(m).input_names().size()); });
}

const char *gd_model_input_name(const gd_model *m, int i) {
  return guarded("gd_model_input_name", static_cast<const char *>(nullptr), [&] {
    const std::vector<std::string> &names = checked(m).input_names();
    if (i < 0 || static_cast<size_t>(i) >= names.size()) {
      throw gd::Error("input " + std::to_string(i) + " does not exist (the model has " +
                      std::to_string(names.size()) + ")");
    }
    return names[i].c_str();
  });
}

int gd_model_run(gd_model *m, int num_inputs, const float *const *inputs, const int *ndims,
                 const int64_t *const *shapes) {
  return guarded("gd_model_run", -1, [&] {
    checked(m);
    m->model->clear_outputs();  // the last run's outputs end here, whatever happens next
    if (num_inputs < 0) throw gd::Error("num_inputs is negative");
    if (num_inputs > 0 && (inputs == nullptr || ndims == nullptr || shapes == nullptr)) {
      throw gd::Error("inputs, ndims and shapes must not be NULL");
    }
    std::vector<gd::Input> arrays;
    for (int i = 0; i < num_inputs; ++i) arrays.push_back({inputs[i], ndims[i], shapes[i]});
    m->model->run(arrays);
    return 0;
  });
}

int gd_model_num_outputs(const gd_model *m) {
  return guarded("gd_model_num_outputs", -1,
                 [&] { return static_cast<int>(checked(m).num_outputs()); });
}

int gd_model_output_ndim(const gd_model *m, int i) {
  return guarded("gd_model_output_ndim", -1,
                 [&] { return static_cast<int>(output(m, i).shape.size()); });
}

const int64_t *gd_model_output_shape(const gd_model *m, int i) {
  return guarded("gd_model_output_shape", static_cast<const int64_t *>(nullptr),
                 [&] { return output(m, i).shape.data(); });
}

const float *gd_model_output_data(const gd_model *m, int i) {
  return guarded("gd_model_output_data", static_cast<const float *>(nullptr),
                 [&] { return output(m, i).data; });
}

const char *gd_model_report(gd_model *m) {
  return guarded("gd_model_report", static_cast<const char *>(nullptr), [&] {
    m->report = checked(m).report();
    return m->report.c_str();
  });
}

void gd_model_free(gd_model *m) { delete m; }

}  // extern "C"
