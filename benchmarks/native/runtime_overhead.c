/* Per-call time of gd_model_run against MXNet's own CachedOp invocation of the same graph
 * from C, for benchmarks/deploy_runtime.py.
 *
 *   runtime_overhead compare LIBMXNET PREFIX REPEATS INPUT...
 *       both, interleaved call by call (which one goes first alternating) after a warm-up;
 *       checks first that they give the same outputs; prints
 *       "baseline_us <median> runtime_us <median>"
 *   runtime_overhead runtime PREFIX REPEATS INPUT...
 *       gd_model_run alone (a tvm_bridge plan); prints "runtime_us <median>"
 * Both print "first_output <value>" (output 0's first element) and the runtime's report.
 *
 * Each INPUT is a shape "2x3x4" (filled with sin(0.37 k), k the element's index) or
 * "SHAPE=VALUE" (filled with VALUE). The baseline is what a C program using MXNet's C API
 * does per call: input NDArrays created and filled, MXInvokeCachedOpEx on a CachedOp
 * with static_alloc (as the runtime's), the outputs waited for and their data read, every
 * handle freed. MXNet's C API is taken from libmxnet.so opened with RTLD_LOCAL, as the
 * runtime does (linking it would let its C++ symbols replace those of gluon_dyn's operator
 * library).
 */
#define _POSIX_C_SOURCE 199309L
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gluon_dyn_runtime.h"

#define MAX_INPUTS 8
#define MAX_DIMS 8
#define WARMUP 20

typedef void *handle;

typedef struct {
  int count;
  int ndims[MAX_INPUTS];
  int64_t dims[MAX_INPUTS][MAX_DIMS];
  const int64_t *shapes[MAX_INPUTS];
  float *data[MAX_INPUTS];
  int64_t sizes[MAX_INPUTS];
} input_set;

static void die(const char *what, const char *detail) {
  fprintf(stderr, "runtime_overhead: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
  exit(1);
}

static void parse_inputs(int argc, char **argv, input_set *inputs) {
  int i;
  inputs->count = argc;
  if (argc > MAX_INPUTS) die("too many inputs", NULL);
  for (i = 0; i < argc; ++i) {
    char *text = argv[i], *value = strchr(text, '=');
    int64_t size = 1, k;
    int ndim = 0;
    while (*text && *text != '=') {
      if (ndim == MAX_DIMS) die("too many dimensions", argv[i]);
      inputs->dims[i][ndim] = strtoll(text, &text, 10);
      size *= inputs->dims[i][ndim++];
      if (*text == 'x') ++text;
    }
    inputs->ndims[i] = ndim;
    inputs->shapes[i] = inputs->dims[i];
    inputs->sizes[i] = size;
    inputs->data[i] = malloc((size_t)size * sizeof(float));
    for (k = 0; k < size; ++k) {
      inputs->data[i][k] = value ? (float)atof(value + 1) : (float)sin(0.37 * (double)k);
    }
  }
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *samples, int count) {
  qsort(samples, (size_t)count, sizeof(double), by_value);
  return count % 2 ? samples[count / 2] : (samples[count / 2 - 1] + samples[count / 2]) / 2;
}

/* ---- the baseline: MXNet's C API ---- */

typedef struct {
  const char *(*GetLastError)(void);
  int (*SymbolCreateFromFile)(const char *, handle *);
  int (*NDArrayLoad)(const char *, uint32_t *, handle **, uint32_t *, const char ***);
  int (*SymbolListInputNames)(handle, int, uint32_t *, const char ***);
  int (*CreateCachedOpEX)(handle, int, const char **, const char **, handle *, _Bool);
  int (*InvokeCachedOpEx)(handle, int, handle *, int *, handle **, const int **);
  int (*NDArrayCreateEx)(const uint32_t *, uint32_t, int, int, int, int, handle *);
  int (*NDArraySyncCopyFromCPU)(handle, const void *, size_t);
  int (*NDArrayWaitToRead)(handle);
  int (*NDArrayGetData)(handle, void **);
  int (*NDArrayFree)(handle);
} mxnet_api;

typedef struct {
  mxnet_api api;
  handle op;
  int num_args;
  handle args[64];
  int data_position[MAX_INPUTS]; /* where data input i goes among the args */
} baseline;

static void *symbol(void *library, const char *name) {
  void *found = dlsym(library, name);
  if (!found) die("libmxnet.so lacks", name);
  return found;
}

static void check(const baseline *b, int status, const char *what) {
  if (status != 0) die(what, b->api.GetLastError());
}

static void load_baseline(baseline *b, const char *libmxnet, const char *prefix,
                          const input_set *inputs) {
  void *library = dlopen(libmxnet, RTLD_NOW | RTLD_LOCAL);
  char path[4096];
  handle sym, *arrays;
  uint32_t count, name_count, num_inputs, i, j;
  const char **names, **inputs_names;
  const char *keys[] = {"static_alloc"}, *values[] = {"true"};
  int data_seen = 0;
  if (!library) die("cannot load libmxnet.so", dlerror());
  *(void **)&b->api.GetLastError = symbol(library, "MXGetLastError");
  *(void **)&b->api.SymbolCreateFromFile = symbol(library, "MXSymbolCreateFromFile");
  *(void **)&b->api.NDArrayLoad = symbol(library, "MXNDArrayLoad");
  *(void **)&b->api.SymbolListInputNames = symbol(library, "NNSymbolListInputNames");
  *(void **)&b->api.CreateCachedOpEX = symbol(library, "MXCreateCachedOpEX");
  *(void **)&b->api.InvokeCachedOpEx = symbol(library, "MXInvokeCachedOpEx");
  *(void **)&b->api.NDArrayCreateEx = symbol(library, "MXNDArrayCreateEx");
  *(void **)&b->api.NDArraySyncCopyFromCPU = symbol(library, "MXNDArraySyncCopyFromCPU");
  *(void **)&b->api.NDArrayWaitToRead = symbol(library, "MXNDArrayWaitToRead");
  *(void **)&b->api.NDArrayGetData = symbol(library, "MXNDArrayGetData");
  *(void **)&b->api.NDArrayFree = symbol(library, "MXNDArrayFree");

  snprintf(path, sizeof(path), "%s-symbol.json", prefix);
  check(b, b->api.SymbolCreateFromFile(path, &sym), path);
  snprintf(path, sizeof(path), "%s-0000.params", prefix);
  check(b, b->api.NDArrayLoad(path, &count, &arrays, &name_count, &names), path);
  check(b, b->api.SymbolListInputNames(sym, 0, &num_inputs, &inputs_names), "input names");
  if (num_inputs > 64) die("too many graph inputs", NULL);
  b->num_args = (int)num_inputs;
  /* Inputs by name: parameters ("arg:"/"aux:" prefixed in the file), else data inputs, which
     MXNet's export names data0, data1, ... (or data). */
  for (i = 0; i < num_inputs; ++i) {
    b->args[i] = NULL;
    for (j = 0; j < count; ++j) {
      if (strcmp(names[j] + 4, inputs_names[i]) == 0) b->args[i] = arrays[j];
    }
    if (!b->args[i]) {
      int index = strcmp(inputs_names[i], "data") == 0 ? 0 : atoi(inputs_names[i] + 4);
      if (index >= inputs->count) die("more data inputs than given", inputs_names[i]);
      b->data_position[index] = (int)i;
      ++data_seen;
    }
  }
  if (data_seen != inputs->count) die("the graph takes another number of data inputs", NULL);
  check(b, b->api.CreateCachedOpEX(sym, 1, keys, values, &b->op, 0), "CachedOp");
}

/* One call as a C program using MXNet's API makes it; returns output 0's first element. */
static float baseline_call(baseline *b, const input_set *inputs) {
  handle data[MAX_INPUTS], *outputs = NULL;
  const int *storage = NULL;
  int i, num_outputs = 0;
  float first = 0;
  for (i = 0; i < inputs->count; ++i) {
    uint32_t dims[MAX_DIMS];
    int d;
    for (d = 0; d < inputs->ndims[i]; ++d) dims[d] = (uint32_t)inputs->dims[i][d];
    check(b, b->api.NDArrayCreateEx(dims, (uint32_t)inputs->ndims[i], 1, 0, 0, 0, &data[i]),
          "input");
    check(b, b->api.NDArraySyncCopyFromCPU(data[i], inputs->data[i], (size_t)inputs->sizes[i]),
          "input copy");
    b->args[b->data_position[i]] = data[i];
  }
  check(b, b->api.InvokeCachedOpEx(b->op, b->num_args, b->args, &num_outputs, &outputs, &storage),
        "invoke");
  for (i = 0; i < num_outputs; ++i) {
    void *values;
    check(b, b->api.NDArrayWaitToRead(outputs[i]), "output");
    check(b, b->api.NDArrayGetData(outputs[i], &values), "output data");
    if (i == 0) first = *(float *)values;
  }
  for (i = 0; i < num_outputs; ++i) b->api.NDArrayFree(outputs[i]);
  for (i = 0; i < inputs->count; ++i) b->api.NDArrayFree(data[i]);
  return first;
}

/* ---- the runtime ---- */

static float runtime_call(gd_model *model, const input_set *inputs) {
  if (gd_model_run(model, inputs->count, (const float *const *)inputs->data, inputs->ndims,
                   inputs->shapes) != 0) {
    die("gd_model_run", gd_last_error());
  }
  return gd_model_output_data(model, 0)[0];
}

int main(int argc, char **argv) {
  int compare = argc > 4 && strcmp(argv[1], "compare") == 0;
  int runtime_only = argc > 3 && strcmp(argv[1], "runtime") == 0;
  const char *prefix;
  int repeats, r, first_input;
  input_set inputs;
  gd_model *model;
  baseline b;
  double *mx_samples, *gd_samples;
  if (!compare && !runtime_only) {
    die("usage: runtime_overhead compare LIBMXNET PREFIX REPEATS INPUT... | "
        "runtime_overhead runtime PREFIX REPEATS INPUT...", NULL);
  }
  prefix = argv[compare ? 3 : 2];
  repeats = atoi(argv[compare ? 4 : 3]);
  first_input = compare ? 5 : 4;
  parse_inputs(argc - first_input, argv + first_input, &inputs);
  model = gd_model_load(prefix);
  if (!model) die("gd_model_load", gd_last_error());
  mx_samples = calloc((size_t)repeats, sizeof(double));
  gd_samples = calloc((size_t)repeats, sizeof(double));
  printf("first_output %.6g\n", runtime_call(model, &inputs));
  if (compare) {
    load_baseline(&b, argv[2], prefix, &inputs);
    if (baseline_call(&b, &inputs) != runtime_call(model, &inputs)) {
      die("the baseline and the runtime give different outputs", NULL);
    }
  }
  for (r = 0; r < WARMUP; ++r) {
    if (compare) baseline_call(&b, &inputs);
    runtime_call(model, &inputs);
  }
  for (r = 0; r < repeats; ++r) {
    /* Alternating which goes first: each one's freed arrays are deleted by MXNet's engine
       while the next call runs. */
    int baseline_first = r % 2 == 0, turn;
    for (turn = 0; turn < 2; ++turn) {
      double start = now_us();
      if (turn == !baseline_first) {
        runtime_call(model, &inputs);
        gd_samples[r] = now_us() - start;
      } else if (compare) {
        baseline_call(&b, &inputs);
        mx_samples[r] = now_us() - start;
      }
    }
  }
  if (compare) printf("baseline_us %.2f ", median(mx_samples, repeats));
  printf("runtime_us %.2f\n", median(gd_samples, repeats));
  printf("report: %s\n", gd_model_report(model));
  gd_model_free(model);
  return 0;
}
