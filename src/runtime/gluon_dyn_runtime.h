/* gluon_dyn_runtime.h: run exported gluon_dyn models from C (C99) or C++, without Python.
 *
 * A model is what `net.export(prefix)` writes: prefix-symbol.json (MXNet's graph, control
 * flow included: _cond, _while_loop, _foreach) and prefix-0000.params. When prefix-plan.json
 * is there too (tvm_bridge's CompiledBlock.export), the plan runs: its TVM segments through
 * TVM's runtime, its MXNet segments as MXNet CachedOps. A call whose array shapes differ from
 * those a TVM segment was compiled for runs as the MXNet graph of prefix-symbol.json instead.
 *
 * Integrity: export also writes prefix-checksums.json, the size and CRC-32 of each file it
 * wrote. gd_model_load checks every file it reads against it first and refuses, naming the
 * file, one that is not listed, truncated or damaged; a model without prefix-checksums.json is
 * refused too (for MXNet files exported without gluon_dyn that you trust,
 * `python -m gluon_dyn.export.record_checksums PREFIX` writes one).
 *
 * Inputs may take any shape the graph accepts, on every call; loops run as many steps as the
 * data says. The library finds libmxnet.so, TVM's runtime and gluon_dyn's operator library by
 * itself (paths recorded when it was built): no environment variable is needed. The first load
 * of a plan with TVM segments sets TVM_NUM_THREADS (to the CPUs this process may use) and
 * TVM_BIND_THREADS=0 unless they are already set, as tvm_bridge does in Python.
 *
 * Data types: inputs and outputs are float32 in this version; a graph whose output has another
 * dtype fails the run with a message saying so.
 *
 * Threads: one gd_model is used by one thread at a time; different models may run in parallel
 * threads. gd_last_error() is per thread.
 *
 * Failures never leave a half-state: gd_model_load returns NULL, gd_model_run returns -1, and
 * gd_last_error() names the file or the input and the cause. After a failed run the model is
 * still usable; it has no outputs until the next successful run.
 */
#ifndef GLUON_DYN_RUNTIME_H_
#define GLUON_DYN_RUNTIME_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gd_model gd_model;

/* Reads prefix-symbol.json and prefix-0000.params (and prefix-plan.json with its segment
   libraries, when present), each checked against prefix-checksums.json first. NULL on
   failure; gd_last_error() says why, naming the file. */
gd_model *gd_model_load(const char *prefix);

/* The message of the calling thread's last failure ("" when there was none). Valid until the
   thread's next call into this library. */
const char *gd_last_error(void);

/* The model's data inputs, in the order gd_model_run takes them: the exported forward's
   arguments (data0, data1, ...; "data" when it has one). NULL for an index out of range. */
int gd_model_num_inputs(const gd_model *m);
const char *gd_model_input_name(const gd_model *m, int i);

/* num_inputs float32 inputs in gd_model_input_name order, each dense in row-major order with
   ndims[i] dimensions of sizes shapes[i][0..ndims[i]-1] (each at least 1); any shape the model
   accepts. 0 on success, -1 on failure (a wrong count, rank or shape included). */
int gd_model_run(gd_model *m, int num_inputs, const float *const *inputs, const int *ndims,
                 const int64_t *const *shapes);

/* The outputs of the last successful run, in the exported forward's order. ndim is -1 and
   shape and data are NULL when there is no such output (an index out of range, or no
   successful run since the last failure). */
int gd_model_num_outputs(const gd_model *m);
int gd_model_output_ndim(const gd_model *m, int i);
const int64_t *gd_model_output_shape(const gd_model *m, int i);
const float *gd_model_output_data(const gd_model *m, int i); /* valid until the next run or free */

/* How the model's runs went, for diagnosis: how many ran as the plan and how many as the MXNet
   graph (their types differed from the plan's), with the last difference. Valid until the next
   call on m. */
const char *gd_model_report(gd_model *m);

/* Releases the model and its outputs; NULL is ignored. */
void gd_model_free(gd_model *m);

#ifdef __cplusplus
}
#endif

#endif /* GLUON_DYN_RUNTIME_H_ */
