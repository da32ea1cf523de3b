/* cuda_pool.h - the device memory pool of a CUDA run, as plain C.
 *
 * A run reserves one block of device memory after the weights are loaded
 * (sized here from cudaMemGetInfo's free bytes and the batch's KV cache and
 * activations), and every later backend allocation (KV caches, forward
 * buffers, probability scratch) is carved out of it by this host-side
 * bookkeeping.  So the decode loop never calls cudaMalloc, and running out
 * of memory is a NULL from alloc (an EB_ERR_NOMEM upstream, status 'oom'),
 * never a failed CUDA call.  Nothing here touches CUDA: it is tested on the
 * CPU (tests/test_cuda_pool.c). */
#ifndef EB_CUDA_POOL_H
#define EB_CUDA_POOL_H

#include <stddef.h>

#include "util/err.h"

/* ---- the arena: first-fit over byte offsets into the reserved block ---- */

struct dev_seg {
    size_t off, size;
    int used;
};

struct dev_arena {
    size_t size;          /* bytes of the reserved block */
    size_t align;         /* every offset is a multiple (a power of two) */
    struct dev_seg *segs; /* cover [0, size) in offset order; no two free ones adjacent */
    int n_segs, cap_segs;
    size_t used, peak;    /* bytes handed out now, and at most */
};

/* An arena over `size` bytes; align must be a power of two. */
int dev_arena_init(struct dev_arena *a, size_t size, size_t align, struct eb_err *e);
void dev_arena_release(struct dev_arena *a);

/* Offset of a new block of `bytes` (rounded up to align; 0 counts as align)
 * in *off; returns 0, or -1 when no free segment is large enough (or the
 * bookkeeping itself cannot grow). */
int dev_arena_alloc(struct dev_arena *a, size_t bytes, size_t *off);

/* Frees the block that starts at off; -1 when no block starts there. */
int dev_arena_free(struct dev_arena *a, size_t off);

/* ---- sizing ---- */

struct kv_pool_need {
    size_t kv_bytes_per_seq; /* one sequence's KV cache (and query ring) on the device */
    size_t act_bytes;        /* forward buffers and scratch for the whole batch */
    int batch;               /* sequences held at once, >= 1 */
};

struct kv_pool_plan {
    size_t pool_bytes; /* to reserve: batch * kv + activations, rounded up to 2 MiB */
    size_t headroom;   /* left outside the pool for cuBLAS, the CUDA context and staging */
    int max_batch;     /* sequences the free memory could hold with these activations */
};

/* Device memory left outside the pool, from the device's total:
 * max(512 MiB, total / 32).  cuBLAS keeps a workspace per handle (up to
 * 32 MiB on Hopper) and cuBLASLt heuristics may ask for more, the context
 * itself grows with lazily loaded kernels (tens of MiB), and the backend's
 * metadata staging and the few buffers that still grow on demand (score
 * scratch of the scoring primitives) need some room outside the pool. */
size_t kv_pool_headroom(size_t total_bytes);

/* Plans the pool for `need` given the device's free and total bytes (after
 * the weights are uploaded).  Fails with EB_ERR_NOMEM, naming both sizes,
 * when the batch does not fit (out->max_batch still says what would), and
 * with EB_ERR_OTHER for a malformed need. */
int kv_pool_plan(size_t free_bytes, size_t total_bytes, const struct kv_pool_need *need,
                 struct kv_pool_plan *out, struct eb_err *e);

/* Bytes of the pool that `need` asks for: batch * kv + activations, one
 * 2 MiB slack per sequence and one for the activations, rounded up to
 * 2 MiB (SIZE_MAX on overflow or a batch < 1). */
size_t kv_pool_bytes(const struct kv_pool_need *need);

/* What a generate of `need` does with the pool a run holds (pool_bytes 0:
 * none yet) of which pool_used bytes are handed out now. */
enum kv_pool_action {
    KV_POOL_KEEP,    /* what is free in the pool holds the batch */
    KV_POOL_RESERVE, /* no pool yet: plan and reserve one */
    KV_POOL_REPLAN   /* too small but empty: release it, plan and reserve again */
};

/* Decides; fails with EB_ERR_NOMEM (the point's 'oom') when the pool is too
 * small and still in use, so it can neither hold the batch nor be released,
 * and with EB_ERR_OTHER for a malformed need. */
int kv_pool_decide(size_t pool_bytes, size_t pool_used, const struct kv_pool_need *need,
                   enum kv_pool_action *act, struct eb_err *e);

/* ---- the weights ---- */

/* Device bytes of a matrix of n_elements of enum weight_type `type` as the
 * CUDA backend holds it (cuda_weight.cu): f32 in exact mode or for F32
 * tensors, else 16 bits (quantized types are dequantized to bf16).  Vectors
 * are f32 whatever their type. */
size_t cuda_matrix_bytes(int type, size_t n_elements, int exact);

/* The weights fit in the free device memory with the pool's headroom left;
 * else EB_ERR_NOMEM naming the sizes (checked before uploading them). */
int cuda_weights_fit(size_t weight_bytes, size_t free_bytes, size_t total_bytes,
                     struct eb_err *e);

/* ---- device selection ---- */

/* Parses a device name: "cuda" (device 0) or "cuda:N"; -1 with a message
 * for anything else (including "cpu": the caller dispatches that). */
int cuda_device_parse(const char *spec, int *device, struct eb_err *e);

#endif
