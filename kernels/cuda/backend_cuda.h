/* backend_cuda.h - the CUDA backend (cuBLAS + kernels), built by `make cuda`
 * into kernels/cuda/build/libevictbench_cuda.a.
 *
 * It implements struct backend exactly as the CPU backend does: float*
 * tensors live in device memory, int* metadata and inv_freq stay on the host
 * (the backend stages them over itself, asynchronously).
 *
 * A build without CUDA links backend_cuda_stub.c instead (weak definitions in
 * libevictbench.a): every entry point below then fails with one clear line,
 * so `--device cuda` on a CPU build is an error, not a link failure. */
#ifndef EB_BACKEND_CUDA_H
#define EB_BACKEND_CUDA_H

/* backend.h and err.h have no C++ guards; their functions are C functions. */
#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/backend.h"
#include "kernels/cuda/cuda_pool.h"
#include "util/err.h"

/* 1 in a binary with the CUDA backend linked (make cuda), 0 with the stubs.
 * Cheap: touches no driver. */
int backend_cuda_linked(void);

/* A backend on CUDA device `device`; NULL with e set (one line: no driver,
 * no such device, cuBLAS cannot start, or a build without CUDA). */
struct backend *backend_cuda_create(int device, struct eb_err *e);

/* Why backend_cuda_create(device) would fail, as one line written into msg;
 * returns 0 when the device is usable, -1 otherwise. */
int backend_cuda_probe(int device, char *msg, size_t msg_size);

/* The backend's ops return nothing, so the first CUDA/cuBLAS failure is kept
 * (sticky) and can be read here: NULL while everything has succeeded.
 * (alloc failing for lack of memory returns NULL and is not recorded.) */
const char *backend_cuda_error(const struct backend *be);

/* cudaMemGetInfo of the backend's device: free and total bytes. */
int backend_cuda_mem_info(struct backend *be, size_t *free_bytes, size_t *total_bytes,
                          struct eb_err *e);

/* Plans (kv_pool_plan, from the device's free memory now) and reserves the
 * run's device pool; from then on every be->alloc is served from the pool
 * and returns NULL when it is full (an 'oom' upstream).  Call once, after
 * the weights are uploaded and before the KV caches are created.  Fails with
 * EB_ERR_NOMEM when the batch does not fit (plan->max_batch says what does). */
int backend_cuda_reserve_pool(struct backend *be, const struct kv_pool_need *need,
                              struct kv_pool_plan *plan, struct eb_err *e);

/* The pool for a generate of `need` (cuda_pool.h kv_pool_decide): keeps
 * the pool when its free part holds the batch, reserves one when there is
 * none, releases and reserves again when it is too small but empty (a sweep
 * over growing batches in one process); EB_ERR_NOMEM when the batch cannot
 * fit (the point's 'oom').  plan->pool_bytes: the pool's size after. */
int backend_cuda_ensure_pool(struct backend *be, const struct kv_pool_need *need,
                             struct kv_pool_plan *plan, struct eb_err *e);

/* Gives the pool's memory back to the device; -1 while any of it is in use
 * (no pool: nothing to do). */
int backend_cuda_release_pool(struct backend *be, struct eb_err *e);

/* on = 0: be->alloc bypasses the pool (cudaMalloc) until called with 1, so
 * what lives across generates (a policy's glue, made before its first
 * generate) does not pin the pool and block a re-plan.  Frees go to
 * whichever gave the block. */
void backend_cuda_pool_serve(struct backend *be, int on);

/* The weights (weight_bytes as this backend holds them, cuda_matrix_bytes)
 * fit in the device's free memory with the pool's headroom left; else
 * EB_ERR_NOMEM with both sizes.  Call before uploading them. */
int backend_cuda_check_weights(struct backend *be, size_t weight_bytes, struct eb_err *e);

/* Bytes of the pool in use now and at most (0 without a pool). */
void backend_cuda_pool_usage(const struct backend *be, size_t *used, size_t *peak);

/* ---- batched attention ----
 * The n problems a[0..n) (n be->attention calls: one per sequence of a
 * forward, each over its own cache) in at most two launches (decode-sized
 * sequences and prefill chunks), where the shapes allow the flash kernel
 * (same n_head, n_kv, head_dim and scale; no probabilities); otherwise one
 * sequence at a time.  Each cache is of its attn_args.kv_type (f32, f16 or
 * bf16, as be->kv_store wrote it; one launch needs one type).  0, or -1 for
 * bad arguments or a CUDA failure. */
int backend_cuda_attention_batch(struct backend *be, const struct attn_args *a, int n);

/* ---- sampling on the device ----
 * Greedy: tokens[r] (host) = the id of the largest logit of row r of
 * logits [n_rows][n_vocab] (device memory), ties to the lowest id as the
 * CPU sampler; only n_rows ints cross to the host instead of the logits. */
int backend_cuda_argmax(struct backend *be, int *tokens, const float *logits, int n_rows,
                        int n_vocab);

/* Temperature + top-k + top-p (or greedy) per row, as model/sampler.c with
 * the uniform draw rows[r].u (cuda_sample.cu states the semantics): the
 * backend's `sample` op.  tokens[r] = -1: row r is left to the host
 * (non-finite logits, or a nucleus wider than the 1,024 candidates sorted on
 * the device).  0, or -1 for bad rows or a CUDA failure. */
int backend_cuda_sample(struct backend *be, int *tokens, const float *logits, int n_rows,
                        int n_vocab, const struct sample_row *rows);

/* 0 while every op has succeeded; else -1 with e set to the first failure,
 * of kind EB_ERR_NOMEM when the device ran out of memory.  The ops return
 * nothing, so the model must ask after each step (see kernels/cuda/README.md). */
int backend_cuda_status(const struct backend *be, struct eb_err *e);

#ifdef __cplusplus
}
#endif

#endif
