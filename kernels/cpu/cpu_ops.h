/* cpu_ops.h - the CPU backend's kernels, shared between its files (not a
 * public header: model/ sees only kernels/backend.h).
 *
 * On the CPU, backend memory is ordinary host memory, so these functions read
 * and write the float pointers directly. */
#ifndef EB_CPU_OPS_H
#define EB_CPU_OPS_H

#include <omp.h>
#include <stddef.h>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_qdot.h"

struct cpu_impl {
    int n_threads;      /* OpenMP threads per op (OpenBLAS itself runs single-threaded) */
    enum cpu_simd simd; /* dot kernels in use */
    int panel_min_m;    /* matmul with at least this many rows dequantizes panels for sgemm */
    void *scratch[2];   /* matmul: [0] quantized activations, [1] f32 weight panels */
    size_t scratch_cap[2];
};

static inline int cpu_threads(const struct backend *be)
{
    return ((const struct cpu_impl *)be->impl)->n_threads;
}

/* Below this many elements of work an OpenMP region costs more than it saves. */
enum { CPU_PARALLEL_MIN = 1 << 14 };

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
/* cpu_weight.c: typed weights */
struct weight *cpu_weight_create(struct backend *be, enum weight_type type, int rows, int cols,
                                 const void *host, int borrow, int as_f32);
void cpu_weight_free(struct backend *be, struct weight *w);
void cpu_matmul(struct backend *be, float *y, const float *x, const struct weight *w,
                const float *bias, int m);
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
/* How attention reads one row of a 16-bit cache: q . k, and o += a * v. */
struct cpu_kv_rows {
    float (*dot)(const float *q, const void *k, int n);
    void (*axpy)(float *o, float a, const void *v, int n);
};
/* The row kernels of a 16-bit type at a SIMD level; -1 for f32 or an unknown type. */
int cpu_kv_rows_for(enum kv_type type, enum cpu_simd level, struct cpu_kv_rows *out);
/* cpu_vscore.c: value-aware primitives */
int cpu_row_range(struct backend *be, float *out, const float *x, int n, int dim);

#endif
