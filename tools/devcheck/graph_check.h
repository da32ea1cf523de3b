/* graph_check.h - gpu_check graph (graph_check.c). */
#ifndef EB_GRAPH_CHECK_H
#define EB_GRAPH_CHECK_H

#include "model/model.h"

/* gpu_check graph's options after the subcommand; returns the exit status. */
int cmd_graph(int argc, char **argv);

/* gpu_check.c's helpers, shared with graph_check.c. */
/* A backend's first failure, if it is the CUDA one. */
int backend_failed(struct backend *be, struct eb_err *e);
/* weights: MODEL_WEIGHTS_F32 (exact mode, as transformers) or the file's types. */
int open_model(const char *path, struct backend *be, enum model_weights weights,
               struct model **m, struct eb_err *e);

#endif
