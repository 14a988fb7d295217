/* Misuse of the C API fails with a message and never crashes: NULL arguments, indices out of
 * range, outputs asked for before a run or after a failed one, a failed load followed by a good
 * one. Each line printed is "<case>: <result> | <gd_last_error()>".
 *
 *   api_misuse GOOD_PREFIX MISSING_PREFIX
 *
 * GOOD_PREFIX is a model with one input that accepts shape (2, 3).
 */
#include <stdint.h>
#include <stdio.h>

#include "gluon_dyn_runtime.h"

static void report(const char *what, long result) {
  printf("%s: %ld | %s\n", what, result, gd_last_error());
}

static void report_pointer(const char *what, const void *result) {
  printf("%s: %s | %s\n", what, result ? "set" : "NULL", gd_last_error());
}

int main(int argc, char **argv) {
  float data[6] = {0.5f, -1, 2, 0.25f, 3, -0.75f};
  const float *inputs[1] = {data};
  const float *null_data[1] = {NULL};
  int64_t dims[2] = {2, 3};
  const int64_t *shapes[1] = {dims};
  const int64_t *null_shapes[1] = {NULL};
  int ndims[1] = {2};
  gd_model *model;
  if (argc != 3) return 1;

  report_pointer("load NULL", gd_model_load(NULL));
  report_pointer("load missing", gd_model_load(argv[2]));
  model = gd_model_load(argv[1]);
  report_pointer("load good after a failed load", model);
  if (!model) return 1;

  report("num_inputs NULL", gd_model_num_inputs(NULL));
  report("num_outputs NULL", gd_model_num_outputs(NULL));
  report_pointer("input_name -1", gd_model_input_name(model, -1));
  report_pointer("input_name 1", gd_model_input_name(model, 1));
  report("output_ndim before a run", gd_model_output_ndim(model, 0));
  report_pointer("output_data before a run", gd_model_output_data(model, 0));

  report("run NULL model", gd_model_run(NULL, 1, inputs, ndims, shapes));
  report("run negative count", gd_model_run(model, -1, inputs, ndims, shapes));
  report("run NULL inputs", gd_model_run(model, 1, NULL, ndims, shapes));
  report("run NULL ndims", gd_model_run(model, 1, inputs, NULL, shapes));
  report("run NULL shapes", gd_model_run(model, 1, inputs, ndims, NULL));
  report("run NULL data", gd_model_run(model, 1, null_data, ndims, shapes));
  report("run NULL shape", gd_model_run(model, 1, inputs, ndims, null_shapes));

  report("run good", gd_model_run(model, 1, inputs, ndims, shapes));
  report("error after a success", 0);
  report("output_ndim 0", gd_model_output_ndim(model, 0));
  report("output_ndim out of range", gd_model_output_ndim(model, gd_model_num_outputs(model)));
  report_pointer("output_shape -1", gd_model_output_shape(model, -1));
  report_pointer("output_data -1", gd_model_output_data(model, -1));
  report_pointer("output_data 0", gd_model_output_data(model, 0));

  dims[1] = 4;
  report("run rejected shape", gd_model_run(model, 1, inputs, ndims, shapes));
  report("output_ndim after a failed run", gd_model_output_ndim(model, 0));
  dims[1] = 3;
  report("run good again", gd_model_run(model, 1, inputs, ndims, shapes));
  report("output_ndim after the good run", gd_model_output_ndim(model, 0));

  report_pointer("report NULL", gd_model_report(NULL));
  gd_model_free(model);
  gd_model_free(NULL);
  printf("done\n");
  return 0;
}
