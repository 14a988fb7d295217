/* Run the model train_and_export.py exported, from C, on the inputs it printed outputs for.
 *
 *   cc -Isrc/runtime examples/deploy/predict.c -Lbuild -lgluon_dyn_runtime \
 *      -Wl,-rpath,$PWD/build -lm -o build/deploy/predict
 *   build/deploy/predict build/deploy/model
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gluon_dyn_runtime.h"

#define FEATURES 4
#define BATCH 2

int main(int argc, char **argv) {
  static const int lengths[3] = {3, 6, 1}, trip_counts[3] = {2, 0, 5};
  gd_model *model;
  int k;
  if (argc != 2) {
    fprintf(stderr, "usage: %s PREFIX\n", argv[0]);
    return 1;
  }
  model = gd_model_load(argv[1]);
  if (!model) {
    fprintf(stderr, "%s\n", gd_last_error());
    return 1;
  }
  for (k = 0; k < 3; ++k) {
    float seq[6 * BATCH * FEATURES], steps = (float)trip_counts[k];
    int64_t seq_shape[3] = {lengths[k], BATCH, FEATURES}, steps_shape[1] = {1};
    const float *inputs[2] = {seq, &steps};
    const int64_t *shapes[2] = {seq_shape, steps_shape};
    int ndims[2] = {3, 1}, t, b, f, i;
    int64_t size = 1;
    const float *scores;
    for (t = 0; t < lengths[k]; ++t)
      for (b = 0; b < BATCH; ++b)
        for (f = 0; f < FEATURES; ++f)
          seq[(t * BATCH + b) * FEATURES + f] = (float)sin(1.0 + k + 0.7 * t + 0.3 * f + 1.3 * b);
    if (gd_model_run(model, 2, inputs, ndims, shapes) != 0) {
      fprintf(stderr, "%s\n", gd_last_error());
      gd_model_free(model);
      return 1;
    }
    for (i = 0; i < gd_model_output_ndim(model, 0); ++i) size *= gd_model_output_shape(model, 0)[i];
    scores = gd_model_output_data(model, 0);
    printf("c example %d:", k);
    for (i = 0; i < size; ++i) printf(" %.5f", scores[i]);
    printf("\n");
  }
  gd_model_free(model);
  return 0;
}
