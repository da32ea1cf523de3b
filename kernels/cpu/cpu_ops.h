/* cpu_ops.h - the CPU backend's kernels, shared between its files (not a
 * public header: model/ sees only kernels/backend.h).
 *
 * On the CPU, backend memory is ordinary host memory, so these functions read
 * and write the float pointers directly. */
#ifndef EB_CPU_OPS_H
#define EB_CPU_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_pool.h"
#include "kernels/cpu/cpu_qdot.h"

struct cpu_impl {
    int n_threads;      /* threads per op (OpenBLAS itself runs single-threaded) */
    struct cpu_pool *pool; /* the n_threads threads (cpu_pool.h) */
    enum cpu_simd simd; /* dot kernels in use */
    int panel_min_m;    /* matmul with at least this many rows dequantizes panels for sgemm */
    void *scratch[3];   /* matmul: [0] quantized activations, [1] f32 weight panels;
                           [2] the fused layer blocks' (cpu_layer.c) */
    size_t scratch_cap[3];
    void *att_items;    /* attention: work items (cpu_attention.c) */
    size_t att_items_cap;
    float *att_scratch; /* attention: per-thread block scores and accumulators, then the
                           partial results of split units */
    size_t att_scratch_cap;
    int fail_bind;      /* EVICTBENCH_CPU_FAIL_BIND (tests): kv_table_binds left until one
                           fails as out of memory; 0: none does */
};

/* One bound slot of a KV table (cpu_kvtable.c): copies of what kv_table_bind
 * was given, lengths and pad flags then kept up to date by kv_append. */
struct cpu_kv_slot {
    int bound;
    enum kv_type type;
    int cap, q_window;
    void **k, **v;        /* [n_layer] */
    float **q_ring;       /* [n_layer], or NULL */
    int *len;             /* [n_layer][n_kv] */
    unsigned char *pad;   /* [n_layer][n_kv][cap], or NULL while the slot has no pad */
    size_t pad_bytes;     /* allocated bytes of pad */
};

struct kv_table {
    int max_seqs, n_layer, n_kv, n_head, head_dim;
    struct cpu_kv_slot *slots;   /* [max_seqs] */
    struct kv_step_seq *step;    /* [max_seqs]: the active slots of this forward pass */
    int n_step;
    enum kv_type type;           /* of the active slots */
};

static inline int cpu_threads(const struct backend *be)
{
    return ((const struct cpu_impl *)be->impl)->n_threads;
}

/* Below this many elements of work a parallel job costs more than it saves. */
enum { CPU_PARALLEL_MIN = 1 << 14 };

/* body(ctx, i0, i1, ith) over [0, n) in chunks of grain items handed out
 * dynamically to the backend's threads (ith: the thread, for per-thread
 * scratch); one call over [0, n) on the caller when !par. */
void cpu_parallel_for(struct backend *be, int n, int grain, int par,
                      void (*body)(void *ctx, int i0, int i1, int ith), void *ctx);
/* One job on all the backend's threads (cpu_pool_run). */
void cpu_parallel(struct backend *be, void (*fn)(void *ctx, int ith, int nth), void *ctx);

/* One row of RMSNorm and of RoPE (n_heads heads at position pos): the
 * arithmetic of cpu_rmsnorm and cpu_rope, for fused callers. */
void cpu_rmsnorm_row(float *y, const float *x, const float *w, int dim, float eps);
void cpu_swiglu_span(enum cpu_simd level, float *y, const float *gate, const float *up, size_t n);
void cpu_rope_row(float *x, int n_heads, int head_dim, int pos, const float *inv_freq,
                  enum rope_pairing pairing);

void cpu_gemm(struct backend *be, float *y, const float *x, const float *w,
              const float *bias, int m, int n, int k);
void cpu_rmsnorm(struct backend *be, float *y, const float *x, const float *w,
                 int rows, int dim, float eps);
void cpu_rope(struct backend *be, float *x, int rows, int n_heads, int head_dim,
              const int *pos, const float *inv_freq, enum rope_pairing pairing);
void cpu_swiglu(struct backend *be, float *y, const float *gate, const float *up, size_t n);
void cpu_add(struct backend *be, float *y, const float *x, size_t n);
void cpu_embed(struct backend *be, float *y, const float *table, const int *ids, int n, int dim);
void cpu_gather_rows(struct backend *be, float *y, const float *x, const int *rows, int n,
                     int dim);
void cpu_attention(struct backend *be, const struct attn_args *a);
int cpu_attention_layer(struct backend *be, struct kv_table *t, const struct attn_layer_args *a);
/* cpu_kvtable.c: the KV table of the layer-granular ops */
struct kv_table *cpu_kv_table_create(struct backend *be, int max_seqs, int n_layer, int n_kv,
                                     int n_head, int head_dim);
void cpu_kv_table_free(struct backend *be, struct kv_table *t);
int cpu_kv_table_bind(struct backend *be, struct kv_table *t, int slot,
                      const struct kv_seq_desc *d);
int cpu_kv_table_step(struct backend *be, struct kv_table *t, int n_seq,
                      const struct kv_step_seq *seqs);
int cpu_kv_append(struct backend *be, struct kv_table *t, int layer, const float *k,
                  const float *v, const float *q);
/* cpu_weight.c: typed weights */
struct weight *cpu_weight_create(struct backend *be, enum weight_type type, int rows, int cols,
                                 const void *host, int borrow, int as_f32);
void cpu_weight_free(struct backend *be, struct weight *w);
/* backend.weight_join: owned parts of one held type, width and layout. */
struct weight *cpu_weight_join(struct backend *be, struct weight *const *parts, int n);
void cpu_matmul(struct backend *be, float *y, const float *x, const struct weight *w,
                const float *bias, int m);
/* Grow impl scratch[which] to at least bytes; 0 or -1. */
int cpu_scratch_reserve(struct cpu_impl *im, int which, size_t bytes);
/* Interleaved weights (w->interleave), for fused callers: y's columns of
 * groups [g0, g1) (8 rows each) for all m rows of act, x quantized by
 * qact_quantize_row for w's kind (acc: y += the product); and the groups per
 * chunk that spreads w over nt threads (nt 0: one chunk). */
void cpu_x8_span(float *y, const uint8_t *act, const struct weight *w, const float *bias, int m,
                 int g0, int g1, int acc);
int cpu_x8_chunk_groups(const struct weight *w, int nt);
/* cpu_layer.c: the fused layer blocks */
int cpu_layer_in(struct backend *be, const struct layer_in_args *a);
int cpu_layer_out(struct backend *be, const struct layer_out_args *a);
void cpu_thread_syncs(const struct backend *be, unsigned long *jobs, unsigned long *barriers);
void cpu_embed_weight(struct backend *be, float *y, const struct weight *w, const int *ids, int n);
/* cpu_score.c: scoring primitives for eviction policies */
int cpu_window_scores(struct backend *be, const struct window_score_args *a);
int cpu_pool1d(struct backend *be, float *out, const float *in, int n, int kernel,
               enum score_pool mode);
int cpu_key_redundancy(struct backend *be, const struct redundancy_args *a);
/* cpu_kv.c: typed KV caches */
void cpu_kv_store(struct backend *be, void *dst, enum kv_type type, const float *src,
                  const int *rows, int n, int dim);
void cpu_kv_load(struct backend *be, float *dst, const void *src, enum kv_type type, size_t n);
/* How attention reads cache rows of any kv_type for the nr query heads
 * sharing them, widening each element once:
 *   dot:     s[r] = q[r] . k over q[nr][n], for one key row of n elements;
 *   accum:   o[r][i] += sum_j e[r][j] * v_j[i], rows j = 0..n-1 in order, for
 *            o[nr][hd] and weights e[nr][stride];
 *   exp_sum: x[i] = exp(x[i] - m) (for x <= m; -inf gives 0), returning the sum. */
struct cpu_kv_rows {
    void (*dot)(float *s, const float *q, int nr, const void *k, int n);
    void (*accum)(float *o, const float *e, int stride, int nr, const void *v, int n, int hd);
    float (*exp_sum)(float *x, int n, float m);
};
/* The row kernels of a type at a SIMD level; -1 for an unknown type. */
int cpu_kv_rows_for(enum kv_type type, enum cpu_simd level, struct cpu_kv_rows *out);
/* cpu_vscore.c: value-aware primitives */
int cpu_row_range(struct backend *be, float *out, const float *x, int n, int dim);
/* cpu_batch.c: the batched eviction ops */
int cpu_window_scores_batch(struct backend *be, const struct score_batch_args *a);
int cpu_key_redundancy_batch(struct backend *be, const struct score_batch_args *a);
int cpu_batch_topk(struct backend *be, const struct score_batch_args *a);
/* A unit's keys as f32: the cache itself, or widened into *tmp (the caller
 * frees it); NULL when out of memory. */
const float *cpu_batch_unit_keys(struct backend *be, const struct score_unit *u, int head_dim,
                                 float **tmp);
/* cpu_batch_layer.c: the scores a run of units (one layer's kv heads) shares */
int cpu_head_mean_batch(struct backend *be, const struct score_batch_args *a);
int cpu_last_query_attn_batch(struct backend *be, const struct score_batch_args *a);
int cpu_kv_gather_batch(struct backend *be, const struct gather_unit *units, int n_units,
                        float *scratch, size_t unit_floats);

#endif
