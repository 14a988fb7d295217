/* Runs an exported model through the C runtime on calls read from a file, for the tests.
 *
 *   run_model PREFIX CALLS RESULTS       each call's outputs (or error) written to RESULTS
 *   run_model --leak PREFIX CALLS WARMUP RUNS
 *                                        WARMUP passes over the calls, then RSS, then RUNS
 *                                        more calls cycling over them, then RSS again
 *   run_model --threads N PREFIX CALLS ROUNDS
 *                                        the calls' outputs, one by one, on one model; then
 *                                        N models, each in its own thread, run the calls
 *                                        ROUNDS times at once, from different starting calls,
 *                                        counting outputs that differ (beyond 1e-5); then
 *                                        "report <k>: <gd_model_report>" per model
 *
 * CALLS: int32 count, then per call: int32 number of inputs, then per input: int32 ndim,
 * int64 dims[ndim], int64 number of elements, float32 data (none for a malformed shape).
 * RESULTS per call: int32 status (0 or -1); on -1: int32 length and the error message; on 0:
 * int32 number of outputs, then per output: int32 ndim, int64 dims[ndim], float32 data.
 * Prints "inputs: <names>", then "report: <gd_model_report>"; a failed load prints
 * "load failed: <gd_last_error>" and exits 2.
 */
#include <math.h>
#include <pthread.h>
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
      read_exact(file, &n, 8);
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

typedef struct {
  int num_outputs;
  int *ndims;
  int64_t *elements;
  float **data;
} outputs;

static outputs copy_outputs(gd_model *model) {
  outputs copy;
  int i;
  copy.num_outputs = gd_model_num_outputs(model);
  copy.ndims = calloc((size_t)copy.num_outputs, sizeof(int));
  copy.elements = calloc((size_t)copy.num_outputs, sizeof(int64_t));
  copy.data = calloc((size_t)copy.num_outputs, sizeof(float *));
  for (i = 0; i < copy.num_outputs; ++i) {
    copy.ndims[i] = gd_model_output_ndim(model, i);
    copy.elements[i] = elements(copy.ndims[i], gd_model_output_shape(model, i));
    copy.data[i] = malloc((size_t)copy.elements[i] * 4 + 4);
    memcpy(copy.data[i], gd_model_output_data(model, i), (size_t)copy.elements[i] * 4);
  }
  return copy;
}

/* Whether the model's outputs are `expected`'s, within 1e-5. */
static int same_outputs(gd_model *model, const outputs *expected) {
  int i;
  int64_t k;
  if (gd_model_num_outputs(model) != expected->num_outputs) return 0;
  for (i = 0; i < expected->num_outputs; ++i) {
    const float *data = gd_model_output_data(model, i);
    if (gd_model_output_ndim(model, i) != expected->ndims[i] ||
        elements(expected->ndims[i], gd_model_output_shape(model, i)) != expected->elements[i]) {
      return 0;
    }
    for (k = 0; k < expected->elements[i]; ++k) {
      if (fabsf(data[k] - expected->data[i][k]) > 1e-5f * (1 + fabsf(expected->data[i][k]))) {
        return 0;
      }
    }
  }
  return 1;
}

typedef struct {
  gd_model *model;
  const call *calls;
  const outputs *expected;
  int count, rounds, first;
  long mismatches, errors;
} job;

static void *run_job(void *argument) {
  job *work = argument;
  int r, k;
  for (r = 0; r < work->rounds; ++r) {
    for (k = 0; k < work->count; ++k) {
      int c = (work->first + k) % work->count;
      if (run(work->model, &work->calls[c]) != 0) {
        ++work->errors;
      } else if (!same_outputs(work->model, &work->expected[c])) {
        ++work->mismatches;
      }
    }
  }
  return NULL;
}

static void run_threads(int threads, const char *prefix, const char *calls_path, int rounds) {
  int count, c, t;
  call *calls = read_calls(calls_path, &count);
  outputs *expected = calloc((size_t)count, sizeof(outputs));
  job *jobs = calloc((size_t)threads, sizeof(job));
  pthread_t *ids = calloc((size_t)threads, sizeof(pthread_t));
  long mismatches = 0, errors = 0;
  gd_model *first = load(prefix);
  for (c = 0; c < count; ++c) {
    if (run(first, &calls[c]) != 0) die(gd_last_error());
    expected[c] = copy_outputs(first);
  }
  for (t = 0; t < threads; ++t) {
    job next = {t ? load(prefix) : first, calls, expected, count, rounds, t * count / threads, 0, 0};
    jobs[t] = next;
  }
  for (t = 0; t < threads; ++t) pthread_create(&ids[t], NULL, run_job, &jobs[t]);
  for (t = 0; t < threads; ++t) {
    pthread_join(ids[t], NULL);
    mismatches += jobs[t].mismatches;
    errors += jobs[t].errors;
  }
  printf("runs %ld mismatches %ld errors %ld\n", (long)threads * rounds * count, mismatches,
         errors);
  for (t = 0; t < threads; ++t) {
    printf("report %d: %s\n", t, gd_model_report(jobs[t].model));
    gd_model_free(jobs[t].model);
  }
}

static long resident_kb(void) {
  long pages = 0, resident = 0;
  FILE *file = fopen("/proc/self/statm", "r");
  if (!file || fscanf(file, "%ld %ld", &pages, &resident) != 2) die("cannot read /proc/self/statm");
  fclose(file);
  return resident * 4;
}

int main(int argc, char **argv) {
  int count, c;
  call *calls;
  gd_model *model;
  if (argc == 6 && strcmp(argv[1], "--threads") == 0) {
    run_threads(atoi(argv[2]), argv[3], argv[4], atoi(argv[5]));
    return 0;
  }
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
    die("usage: run_model PREFIX CALLS RESULTS | run_model --leak PREFIX CALLS WARMUP RUNS | "
        "run_model --threads N PREFIX CALLS ROUNDS");
  }
  printf("report: %s\n", gd_model_report(model));
  gd_model_free(model);
  return 0;
}
