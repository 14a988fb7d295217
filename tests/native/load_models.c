/* Loads each model named on the command line through the C runtime, for the corruption tests:
 * prints one line per prefix, "loaded <prefix>" or "refused <prefix>: <gd_last_error()>" (line
 * breaks in the message made spaces). A refusal must come back as a message, never a crash.
 *
 *   load_models PREFIX...
 */
#include <stdio.h>

#include "gluon_dyn_runtime.h"

int main(int argc, char **argv) {
  int i;
  for (i = 1; i < argc; ++i) {
    gd_model *model = gd_model_load(argv[i]);
    const char *c;
    if (model != NULL) {
      printf("loaded %s\n", argv[i]);
      gd_model_free(model);
      continue;
    }
    printf("refused %s: ", argv[i]);
    for (c = gd_last_error(); *c; ++c) putchar(*c == '\n' ? ' ' : *c);
    putchar('\n');
  }
  return 0;
}
