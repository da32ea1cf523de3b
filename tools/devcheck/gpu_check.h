/* gpu_check.h - gpu_check.c's helpers, shared with its subcommands
 * (decode_compare.c, graph_check.c). */
#ifndef EB_GPU_CHECK_H
#define EB_GPU_CHECK_H

#include "model/model.h"

/* A backend's first failure, if it is the CUDA one. */
int backend_failed(struct backend *be, struct eb_err *e);
/* weights: MODEL_WEIGHTS_F32 (exact mode, as transformers) or the file's types. */
int open_model(const char *path, struct backend *be, enum model_weights weights,
               struct model **m, struct eb_err *e);

#endif
