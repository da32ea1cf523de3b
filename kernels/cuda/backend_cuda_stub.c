/* backend_cuda_stub.c - the CUDA entry points of a build without CUDA.
 *
 * Weak definitions: the CPU build (libevictbench.a) resolves every call to
 * these, so `--device cuda` there fails with one clear line; the CUDA build
 * links libevictbench_cuda.a whole (kernels/cuda/backend_cuda.cu), whose
 * strong definitions win. */
#include "kernels/cuda/backend_cuda.h"

#include <stdio.h>

static const char NO_CUDA[] =
    "cuda: this evictbench was built without CUDA (build ./evictbench-cuda with `make cuda`)";

__attribute__((weak)) int backend_cuda_linked(void)
{
    return 0;
}

__attribute__((weak)) struct backend *backend_cuda_create(int device, struct eb_err *e)
{
    (void)device;
    eb_fail(e, "%s", NO_CUDA);
    return NULL;
}

__attribute__((weak)) int backend_cuda_probe(int device, char *msg, size_t msg_size)
{
    (void)device;
    snprintf(msg, msg_size, "%s", NO_CUDA);
    return -1;
}

__attribute__((weak)) const char *backend_cuda_error(const struct backend *be)
{
    (void)be;
    return NO_CUDA;
}

__attribute__((weak)) int backend_cuda_mem_info(struct backend *be, size_t *free_bytes,
                                                size_t *total_bytes, struct eb_err *e)
{
    (void)be;
    *free_bytes = *total_bytes = 0;
    return eb_fail(e, "%s", NO_CUDA);
}

__attribute__((weak)) int backend_cuda_reserve_pool(struct backend *be,
                                                    const struct kv_pool_need *need,
                                                    struct kv_pool_plan *plan, struct eb_err *e)
{
    (void)be;
    (void)need;
    (void)plan;
    return eb_fail(e, "%s", NO_CUDA);
}

__attribute__((weak)) int backend_cuda_ensure_pool(struct backend *be,
                                                   const struct kv_pool_need *need,
                                                   struct kv_pool_plan *plan, struct eb_err *e)
{
    (void)be, (void)need, (void)plan;
    return eb_fail(e, "%s", NO_CUDA);
}

__attribute__((weak)) int backend_cuda_release_pool(struct backend *be, struct eb_err *e)
{
    (void)be;
    return eb_fail(e, "%s", NO_CUDA);
}

__attribute__((weak)) void backend_cuda_pool_serve(struct backend *be, int on)
{
    (void)be, (void)on;
}

__attribute__((weak)) int backend_cuda_check_weights(struct backend *be, size_t weight_bytes,
                                                     struct eb_err *e)
{
    (void)be, (void)weight_bytes;
    return eb_fail(e, "%s", NO_CUDA);
}

__attribute__((weak)) void backend_cuda_pool_usage(const struct backend *be, size_t *used,
                                                   size_t *peak)
{
    (void)be;
    *used = *peak = 0;
}

__attribute__((weak)) int backend_cuda_argmax(struct backend *be, int *tokens,
                                              const float *logits, int n_rows, int n_vocab)
{
    (void)be, (void)tokens, (void)logits, (void)n_rows, (void)n_vocab;
    return -1;
}

__attribute__((weak)) int backend_cuda_sample(struct backend *be, int *tokens,
                                              const float *logits, int n_rows, int n_vocab,
                                              const struct sample_row *rows)
{
    (void)be, (void)tokens, (void)logits, (void)n_rows, (void)n_vocab, (void)rows;
    return -1;
}

__attribute__((weak)) int backend_cuda_status(const struct backend *be, struct eb_err *e)
{
    (void)be;
    return eb_fail(e, "%s", NO_CUDA);
}
