/* Runs an exported model through the C runtime on calls read from a file, for the tests.
 *
 *   run_model PREFIX CALLS RESULTS       each call's outputs (or error) written to RESULTS
 *   run_model --leak PREFIX CALLS WARMUP RUNS
 *                                        WARMUP passes over the calls, then RSS, then RUNS
 *                                        more calls cycling over them, then RSS again
 *
 * CALLS: int32 count, then per call: int32 number of inputs, then per input: int32 ndim,
 * int64 dims[ndim], float32 data (the product of the dims, none when one is below 1).
 * RESULTS per call: int32 status (0 or -1); on -1: int32 length and the error message; on 0:
 * int32 number of outputs, then per output: int32 ndim, int64 dims[ndim], float32 data.
 * Prints "inputs: <names>", then "report: <gd_model_report>"; a failed load prints
 * "load failed: <gd_last_error>" and exits 2.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gluon_dyn_runtime.h"

typedef struct {
  int num_inputs;
  float **data;
  int *ndims;
  int64_t **dims;
} call;

static void die(const char *what) {
  fprintf(stderr, "run_model: %s\n", what);
  exit(1);
}

static void read_exact(FILE *file, void *into, size_t bytes) {
  if (bytes && fread(into, 1, bytes, file) != bytes) die("truncated calls file");
}

static int64_t elements(int ndim, const int64_t *dims) {
  int64_t count = 1;
  int i;
  if (ndim <= 0) return 0;
  for (i = 0; i < ndim; ++i) {
    if (dims[i] < 1) return 0;
    count *= dims[i];
  }
  return count;
}

static call *read_calls(const char *path, int *count) {
  FILE *file = fopen(path, "rb");
  call *calls;
  int c, i;
  int32_t value;
  if (!file) die("cannot open the calls file");
  read_exact(file, &value, 4);
  *count = value;
  calls = calloc((size_t)value, sizeof(call));
  for (c = 0; c < *count; ++c) {
    read_exact(file, &value, 4);
    calls[c].num_inputs = value;
    calls[c].data = calloc((size_t)value + 1, sizeof(float *));
    calls[c].ndims = calloc((size_t)value + 1, sizeof(int));
    calls[c].dims = calloc((size_t)value + 1, sizeof(int64_t *));
    for (i = 0; i < calls[c].num_inputs; ++i) {
      int64_t n;
      read_exact(file, &value, 4);
      calls[c].ndims[i] = value;
      calls[c].dims[i] = calloc(value > 0 ? (size_t)value : 1, sizeof(int64_t));
      read_exact(file, calls[c].dims[i], value > 0 ? (size_t)value * 8 : 0);
      n = elements(value, calls[c].dims[i]);
      calls[c].data[i] = malloc(n > 0 ? (size_t)n * 4 : 4);
      read_exact(file, calls[c].data[i], (size_t)n * 4);
    }
  }
  fclose(file);
  return calls;
}

static int run(gd_model *model, const call *c) {
  return gd_model_run(model, c->num_inputs, (const float *const *)c->data, c->ndims,
                      (const int64_t *const *)c->dims);
}

static void write_result(FILE *out, gd_model *model, int status) {
  int32_t value = status;
  int i;
  fwrite(&value, 4, 1, out);
  if (status != 0) {
    const char *message = gd_last_error();
    value = (int32_t)strlen(message);
    fwrite(&value, 4, 1, out);
    fwrite(message, 1, (size_t)value, out);
    return;
  }
  value = gd_model_num_outputs(model);
  fwrite(&value, 4, 1, out);
  for (i = 0; i < gd_model_num_outputs(model); ++i) {
    int32_t ndim = gd_model_output_ndim(model, i);
    const int64_t *dims = gd_model_output_shape(model, i);
    fwrite(&ndim, 4, 1, out);
    fwrite(dims, 8, (size_t)ndim, out);
    fwrite(gd_model_output_data(model, i), 4, (size_t)elements(ndim, dims), out);
  }
}

static long resident_kb(void) {
  long pages = 0, resident = 0;
  FILE *file = fopen("/proc/self/statm", "r");
  if (!file || fscanf(file, "%ld %ld", &pages, &resident) != 2) die("cannot read /proc/self/statm");
  fclose(file);
  return resident * 4;
}

static gd_model *load(const char *prefix) {
  gd_model *model = gd_model_load(prefix);
  int i;
  if (!model) {
    printf("load failed: %s\n", gd_last_error());
    exit(2);
  }
  printf("inputs:");
  for (i = 0; i < gd_model_num_inputs(model); ++i) printf(" %s", gd_model_input_name(model, i));
  printf("\n");
  return model;
}

int main(int argc, char **argv) {
  int count, c;
  call *calls;
  gd_model *model;
  if (argc == 6 && strcmp(argv[1], "--leak") == 0) {
    long warmup = atol(argv[4]), runs = atol(argv[5]), k, before;
    model = load(argv[2]);
    calls = read_calls(argv[3], &count);
    for (k = 0; k < warmup * count; ++k) {
      if (run(model, &calls[k % count]) != 0) die(gd_last_error());
    }
    before = resident_kb();
    for (k = 0; k < runs; ++k) {
      if (run(model, &calls[k % count]) != 0) die(gd_last_error());
    }
    printf("rss_kb %ld %ld\n", before, resident_kb());
  } else if (argc == 4) {
    FILE *out;
    model = load(argv[1]);
    calls = read_calls(argv[2], &count);
    out = fopen(argv[3], "wb");
    if (!out) die("cannot write the results file");
    for (c = 0; c < count; ++c) write_result(out, model, run(model, &calls[c]));
    fclose(out);
  } else {
    die("usage: run_model PREFIX CALLS RESULTS | run_model --leak PREFIX CALLS WARMUP RUNS");
  }
  printf("report: %s\n", gd_model_report(model));
  gd_model_free(model);
  return 0;
}
