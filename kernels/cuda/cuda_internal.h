/* cuda_internal.h - what the CUDA backend's translation units share: the
 * backend state, failure recording, metadata staging and block reductions.
 * Not part of the backend's interface (that is backend_cuda.h). */
#ifndef EB_CUDA_INTERNAL_H
#define EB_CUDA_INTERNAL_H

#include "kernels/cuda/backend_cuda.h"
extern "C" {
#include "kernels/cuda/cuda_fault.h"
#include "kernels/step_graph.h"
}

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stddef.h>

struct cuda_impl {
    int device;
    int n_sm;          /* streaming multiprocessors: sizes the attention splits */
    cublasHandle_t blas;   /* f32 gemm, pedantic: the exact path */
    cublasHandle_t blas16; /* 16-bit weights: tensor cores, f32 accumulation */
    void *d_act16;         /* activations rounded to the weights' 16-bit type */
    size_t d_act16_cap;    /* in 2-byte elements */
    /* Host metadata (ids, positions, kv lengths, pad masks, inv_freq) goes
     * through a pinned ring and an async copy on the default stream, so an op
     * never waits for the GPU; the ring waits once per wrap (see stage()). */
    char *stage_host, *stage_dev;
    size_t stage_cap, stage_off;
    float *d_floats;   /* staging for an in-place gather, or scratch for the scoring ops */
    size_t d_floats_cap;
    float *d_scores;   /* attention scores of the general kernel when the caller wants no probs */
    size_t d_scores_cap;
    float *d_part;     /* split-K partial outputs of the flash kernels */
    size_t d_part_cap;
    char *h_scratch;   /* host: descriptors of a batched attention launch */
    size_t h_scratch_cap;
    int *d_tokens;     /* sampled ids */
    size_t d_tokens_cap;
    /* The run's pool (backend_cuda_reserve_pool); pool_base NULL until then. */
    char *pool_base;
    struct dev_arena arena;
    bool pool_off;     /* backend_cuda_pool_serve(0): alloc bypasses the pool for now */
    struct cuda_fault fault; /* first failure (cuda_fault.h: an OOM or a failure) */
    /* The device clock (backend.time_*): two events, recorded in turn. */
    cudaEvent_t ev[2];
    int ev_marks;      /* marks recorded; the latest is ev[(ev_marks - 1) % 2] */
    double waited_s;   /* host seconds blocked on the device */
    /* Step graphs (cuda_graph.cu; EVICTBENCH_CUDA_GRAPH=1): every op runs on
     * the per-thread default stream, which a capture records. */
    struct step_graph graph;   /* when to capture, when to replay */
    cudaGraphExec_t graph_exec; /* the kept recording, NULL: none */
    bool graph_tainted;        /* the capture in progress staged host memory */
    unsigned long grown;       /* buffers grow() reallocated, ever */
    unsigned long graph_grown; /* `grown` when the kept recording was made: a
                                  reallocation since leaves it pointing at freed memory */
    void *blas_ws;             /* cuBLAS's fixed workspace while graphs are on */
    struct kv_table *step_table; /* the table of the last kv_table_step */
};

/* The mode of the step in progress (STEP_EAGER outside a step graph). */
static inline int graph_mode(const struct backend *be)
{
    return ((const struct cuda_impl *)be->impl)->graph.mode;
}

static const unsigned CUDA_THREADS = 256;

/* Host seconds on a monotonic clock (the time a blocking call waits). */
double cuda_host_s(void);
/* A blocking call's wait, counted into time_waited_s: t0 from cuda_host_s. */
static inline void cuda_waited(struct backend *be, double t0)
{
    ((struct cuda_impl *)be->impl)->waited_s += cuda_host_s() - t0;
}

static inline struct cuda_impl *impl_of(const struct backend *be)
{
    return (struct cuda_impl *)be->impl;
}

static inline bool failed(struct backend *be)
{
    return impl_of(be)->fault.kind != CUDA_FAULT_NONE;
}

/* Records the first failure; returns true when rc is success.  An
 * allocation failure is an OOM when the context is healthy once it is
 * cleared; any other error is a failure named by the CUDA error. */
bool cuda_ok(struct backend *be, cudaError_t rc, const char *what);
/* Records a failure that is not a CUDA error (bad arguments, an unknown
 * type): the op did nothing, so its output must not be read as numbers. */
void cuda_fail(struct backend *be, const char *what, const char *why);
/* cuda_fail for an op that returns a status: records it and returns -1. */
static inline int refuse(struct backend *be, const char *what, const char *why)
{
    cuda_fail(be, what, why);
    return -1;
}
bool blas_ok(struct backend *be, cublasStatus_t rc, const char *what);
/* After a kernel launch: catches bad launch configurations. */
bool launched(struct backend *be, const char *what);
/* Grows a device buffer (outside the pool) to hold n elements of `size` bytes. */
bool grow(struct backend *be, void **buf, size_t *cap, size_t n, size_t size, const char *what);
/* A device copy of `bytes` of host memory, valid for the work queued after
 * it on the default stream until the ring wraps; NULL (error recorded) on
 * failure.  An op that stages several arrays for one kernel reserves their
 * room first (stage_reserve with their total and count), so that no wrap
 * falls between them. */
const void *stage(struct backend *be, const void *host, size_t bytes);
bool stage_reserve(struct backend *be, size_t bytes, int n_items);
/* 1 when EVICTBENCH_CUDA_TILES=0: the window logits a warp per key, the
 * redundancy search a block per row and the top-k by counting, as before
 * the tiles (cuda_batch.cu), for comparisons. */
bool cuda_tiles_off(void);

static inline unsigned blocks_for(size_t n, unsigned threads)
{
    size_t b = (n + threads - 1) / threads;
    return b > 65535u * 16u ? 65535u * 16u : (unsigned)b; /* kernels loop over the rest */
}

/* ---- reductions (blockDim.x a multiple of 32) ---- */

__device__ static inline float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

__device__ static inline float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
    return v;
}

/* Butterfly forms: every lane gets the result. */
__device__ static inline float warp_sum_all(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ static inline float warp_max_all(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Sum (or max) over the block; every thread gets the result.  `red` is 32
 * floats of shared memory. */
__device__ static inline float block_reduce(float v, float *red, bool is_max)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    v = is_max ? warp_max(v) : warp_sum(v);
    __syncthreads(); /* red may still be read from a previous reduction */
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float r = is_max ? -INFINITY : 0.0f;
    if (warp == 0) {
        float t = lane < n_warps ? red[lane] : r;
        r = is_max ? warp_max(t) : warp_sum(t);
        if (lane == 0) red[0] = r;
    }
    __syncthreads();
    return red[0];
}

/* ---- KV element types: the kernels are templated on how a cache stores a value ---- */

__device__ static inline float kv_to_float(float x) { return x; }
__device__ static inline float kv_to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ static inline float kv_to_float(__half x) { return __half2float(x); }

/* Element i of keys whose type is known only at run time (a score unit's). */
__device__ static inline float kv_elem_at(const void *k, int type, size_t i)
{
    if (type == KV_F16) return __half2float(((const __half *)k)[i]);
    if (type == KV_BF16) return __bfloat162float(((const __nv_bfloat16 *)k)[i]);
    return ((const float *)k)[i];
}

/* Storing an f32 value, rounded to nearest even. */
__device__ static inline void kv_put(float *p, float x) { *p = x; }
__device__ static inline void kv_put(__nv_bfloat16 *p, float x) { *p = __float2bfloat16_rn(x); }
__device__ static inline void kv_put(__half *p, float x) { *p = __float2half_rn(x); }

/* Eight consecutive values (16-byte aligned for bf16, 32-byte for f32). */
__device__ static inline void kv_load8(const float *p, float *out)
{
    float4 a = *(const float4 *)p, b = *(const float4 *)(p + 4);
    out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
    out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
}

__device__ static inline void kv_load8(const __nv_bfloat16 *p, float *out)
{
    uint4 raw = *(const uint4 *)p;
    const __nv_bfloat162 *h = (const __nv_bfloat162 *)&raw;
    for (int i = 0; i < 4; i++) {
        float2 f = __bfloat1622float2(h[i]);
        out[2 * i] = f.x;
        out[2 * i + 1] = f.y;
    }
}

__device__ static inline void kv_load8(const __half *p, float *out)
{
    uint4 raw = *(const uint4 *)p;
    const __half2 *h = (const __half2 *)&raw;
    for (int i = 0; i < 4; i++) {
        float2 f = __half22float2(h[i]);
        out[2 * i] = f.x;
        out[2 * i + 1] = f.y;
    }
}

/* 1 for the KV element types the kernels are instantiated for. */
static inline bool kv_type_known(enum kv_type t)
{
    return t == KV_F32 || t == KV_F16 || t == KV_BF16;
}

/* ---- ops shared between the translation units ---- */

float *cuda_alloc(struct backend *be, size_t n_floats);
void cuda_free(struct backend *be, float *p);
void cuda_upload(struct backend *be, float *dst, const float *src_host, size_t n);
void cuda_gemm(struct backend *be, float *y, const float *x, const float *w, const float *bias,
               int m, int n, int k);
/* y[i] = x[rows[i]] for n rows of dim (rows on host); y may overlap x. */
void cuda_gather(struct backend *be, float *y, const float *x, const int *rows, int n, int dim,
                 const char *what);
struct weight *cuda_weight_create(struct backend *be, enum weight_type type, int rows, int cols,
                                  const void *host, int borrow, int as_f32);
void cuda_weight_free(struct backend *be, struct weight *w);
/* backend.weight_join: parts of one held type and width, copied on the device. */
struct weight *cuda_weight_join(struct backend *be, struct weight *const *parts, int n);
/* backend.layer_in, layer_out over joined 16-bit weights (cuda_fused.cu); 1: not served. */
int cuda_layer_in(struct backend *be, const struct layer_in_args *a);
int cuda_layer_out(struct backend *be, const struct layer_out_args *a);
void cuda_matmul(struct backend *be, float *y, const float *x, const struct weight *w,
                 const float *bias, int m);
void cuda_embed_weight(struct backend *be, float *y, const struct weight *w, const int *ids,
                       int n);
void cuda_embed_weight_dev(struct backend *be, float *y, const struct weight *w,
                           const int *ids_dev, int n);

void cuda_attention(struct backend *be, const struct attn_args *a);
/* n sequences' attention (backend_cuda_attention_batch); each cache's type is its
 * attn_args.kv_type. */
int cuda_attention_batch(struct backend *be, const struct attn_args *a, int n);
int cuda_window_scores(struct backend *be, const struct window_score_args *a);
int cuda_pool1d(struct backend *be, float *out, const float *in, int n, int kernel,
                enum score_pool mode);
int cuda_key_redundancy(struct backend *be, const struct redundancy_args *a);
int cuda_row_range(struct backend *be, float *out, const float *x, int n, int dim);
/* cuda_batch.cu: the batched eviction ops */
int cuda_window_scores_batch(struct backend *be, const struct score_batch_args *a);
int cuda_key_redundancy_batch(struct backend *be, const struct score_batch_args *a);
int cuda_batch_topk(struct backend *be, const struct score_batch_args *a);
/* cuda_batch_layer.cu: the scores a run of units (one layer's kv heads) shares */
int cuda_head_mean_batch(struct backend *be, const struct score_batch_args *a);
int cuda_last_query_attn_batch(struct backend *be, const struct score_batch_args *a);
int cuda_kv_gather_batch(struct backend *be, const struct gather_unit *units, int n_units,
                         float *scratch, size_t unit_floats);
void cuda_sync(struct backend *be);
/* Sets be's layer-granular ops (cuda_layer.cu). */
void cuda_layer_ops_install(struct backend *be);
/* Whether the batch of the last kv_table_step can be recorded as a step
 * graph (decode rows only, the flash kernel for every slot), its split
 * partials for the fixed grid allocated (cuda_layer.cu). */
bool cuda_layer_graphable(struct backend *be);
/* Sets be's step-graph ops when EVICTBENCH_CUDA_GRAPH=1 (cuda_graph.cu); 0,
 * or -1 with the failure recorded.  cuda_graph_release frees their state. */
int cuda_graph_install(struct backend *be);
void cuda_graph_release(struct backend *be);
/* Scratch of `bytes` in d_floats (256-byte aligned by cudaMalloc). */
void *float_scratch(struct backend *be, size_t bytes, const char *what);

#endif
