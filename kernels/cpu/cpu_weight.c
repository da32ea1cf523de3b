/* cpu_weight.c - typed weights on the CPU: creation (in place on borrowed
 * bytes, zero copy), embedding rows, and the matmul driver.
 *
 * matmul y[m][n] = x[m][k] . W^T picks one of two paths by m:
 *  - small m (decode, small batches): x is quantized once per call to 8-bit
 *    blocks, then every weight row is dotted with every x row by the integer
 *    kernels of cpu_qdot_*.c, QDOT_ROWS x rows at a time where the type has a
 *    multi-row kernel (each weight block unpacked once for those rows), the
 *    rest one by one.  Threads split the weight rows into tiles; a tile's
 *    rows are read from memory once and reused from cache for all m rows of
 *    x, so a batch of 16 costs about one pass over the weights.
 *  - large m (prefill) of the types without interleaved kernels (Q5_0, Q5_1,
 *    Q5_K, F16, BF16; every type when the AVX2 kernels are off): a tile of
 *    weight rows is dequantized to an f32 panel in per-thread scratch, then
 *    OpenBLAS sgemm multiplies it with all of x.  Dequantizing is O(n k), the
 *    product O(m n k), so for large m this is sgemm speed, which beats the
 *    row-by-row integer kernels.  The 8-row interleaved kernels (Q4_0, Q4_1,
 *    Q8_0, Q4_K, Q6_K on AVX2) beat sgemm at every m and take all of them.
 * Both round x to 8 bits per block first (the error llama.cpp accepts; tests
 * bound it) and multiply the same values, so a row's result does not depend
 * on which path its batch took, up to the order of f32 sums: a sequence
 * decodes the same alone or in a batch.
 *
 * Scratch (the quantized x, the f32 panels) grows on demand and stays with the
 * backend, so a step allocates nothing once warm.  If it cannot grow, the
 * call falls back to dequantizing one block at a time on the stack. */
#include "kernels/cpu/cpu_ops.h"

#include <cblas.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "kernels/cpu/cpu_qdot.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"

enum {
    X8_CHUNKS_PER_THREAD = 16, /* chunks of groups per thread in the interleaved path */
    X8_ROW_BLOCK = 64,  /* activation rows per pass over a chunk */
    X8_OWN_QUANT_M = 32, /* up to this many rows every thread quantizes x itself */
    TILE_ROWS = 16,     /* weight rows per tile of the integer path */
    PANEL_ROWS = 128,   /* weight rows per f32 panel of the sgemm path */
    ALIGN = 64
};

static void *aligned_bytes(size_t bytes)
{
    bytes = (bytes + ALIGN - 1) / ALIGN * ALIGN;
    return aligned_alloc(ALIGN, bytes ? bytes : ALIGN);
}

/* Memory for a weight's data.  Decode at batch 1 streams every weight once
 * a token: with 4 KiB pages that is a TLB miss every 4 KiB of the stream
 * (about 270,000 a token on the 1.5B), so a weight of at least 2 MiB gets
 * whole 2 MiB pages (aligned, its size rounded up, marked for transparent
 * huge pages; where the kernel's THP setting is "never", madvise changes
 * nothing).  The last page of each is partly wasted: about 50 MB on the
 * 1.5B's 1.1 GB.  EVICTBENCH_CPU_HUGEPAGES=0 keeps 4 KiB pages.  (KV caches
 * stay on 4 KiB pages: a huge page faulted in by a cache's first row would
 * hold up to 2 MiB of slots that may never be used.) */
static void *weight_bytes(size_t bytes)
{
    const size_t huge = (size_t)2 << 20;
    const char *v = getenv("EVICTBENCH_CPU_HUGEPAGES");
    if (bytes < huge || (v && strcmp(v, "0") == 0)) return aligned_bytes(bytes);
    if (bytes > SIZE_MAX - huge) return NULL;
    size_t n = (bytes + huge - 1) / huge * huge;
    void *p = aligned_alloc(huge, n);
    if (p) (void)madvise(p, n, MADV_HUGEPAGE); /* advice: a refusal leaves 4 KiB pages */
    return p;
}

/* The interleaved kernels of t, where the AVX2 kernels run and the rows
 * come in whole groups of 8; else NULL. */
static const struct x8_kernels *x8_for(const struct backend *be, enum weight_type type, int rows)
{
    const struct cpu_impl *im = be->impl;
    if (im->simd != CPU_SIMD_AVX2 || rows % 8 != 0) return NULL;
    return x8_kernels_for(type);
}

struct pack_job {
    const struct x8_kernels *x8;
    const uint8_t *host;
    size_t file_row_bytes, group_bytes;
    int nblocks;
    uint8_t *g;
};

static void pack_groups(void *ctx, int i0, int i1, int ith)
{
    (void)ith;
    const struct pack_job *j = ctx;
    for (int i = i0; i < i1; i++)
        j->x8->pack(j->host + (size_t)i * 8 * j->file_row_bytes, j->file_row_bytes, j->nblocks,
                    j->g + (size_t)i * j->group_bytes);
}

static int create_x8(struct backend *be, struct weight *w, const struct x8_kernels *x8,
                     const void *host, size_t file_row_bytes)
{
    int groups = w->rows / 8, nblocks = w->cols / x8->block_elems;
    size_t group_bytes = (size_t)nblocks * x8->block_bytes;
    uint8_t *g = weight_bytes((size_t)groups * group_bytes);
    if (!g) return -1;
    struct pack_job j = {x8, host, file_row_bytes, group_bytes, nblocks, g};
    cpu_parallel_for(be, groups, 16, groups >= 64, pack_groups, &j);
    w->held = w->type;
    w->interleave = 8;
    w->row_bytes = group_bytes / 8;
    w->bytes = (size_t)groups * group_bytes;
    w->data = g;
    return 0;
}

struct deq_job {
    enum weight_type type;
    const uint8_t *host;
    size_t row_bytes;
    int cols;
    float *f;
    atomic_int bad;
};

static void dequantize_rows(void *ctx, int r0, int r1, int ith)
{
    (void)ith;
    struct deq_job *j = ctx;
    for (int r = r0; r < r1; r++)
        if (quant_dequantize((int)j->type, j->host + (size_t)r * j->row_bytes,
                             j->f + (size_t)r * j->cols, j->cols))
            atomic_store(&j->bad, 1);
}

struct weight *cpu_weight_create(struct backend *be, enum weight_type type, int rows, int cols,
                                 const void *host, int borrow, int as_f32)
{
    if (rows <= 0 || cols <= 0 || !host || !quant_type_supported((int)type)) return NULL;
    size_t row_bytes = quant_row_bytes((int)type, cols);
    if (row_bytes == 0 || (size_t)rows > SIZE_MAX / row_bytes) return NULL;
    struct weight *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->type = type;
    w->rows = rows;
    w->cols = cols;
    if (as_f32 || !qdot_scalar(type)) {
        size_t n = (size_t)rows * (size_t)cols;
        float *f = weight_bytes(n * sizeof(float));
        if (!f) goto fail;
        struct deq_job j = {type, host, row_bytes, cols, f, 0};
        cpu_parallel_for(be, rows, 64, n >= (1u << 20), dequantize_rows, &j);
        int bad = atomic_load(&j.bad);
        if (bad) {
            free(f);
            goto fail;
        }
        w->held = WEIGHT_F32;
        w->row_bytes = (size_t)cols * sizeof(float);
        w->bytes = n * sizeof(float);
        w->data = f;
        return w;
    }
    const struct x8_kernels *x8 = x8_for(be, type, rows);
    if (x8) {
        if (create_x8(be, w, x8, host, row_bytes)) goto fail;
        return w;
    }
    w->held = type;
    w->row_bytes = row_bytes;
    /* f32 rows go to OpenBLAS, which wants float-aligned pointers (a
     * safetensors offset need not be). */
    if (borrow && (type != WEIGHT_F32 || (uintptr_t)host % sizeof(float) == 0)) {
        w->data = host;
        w->bytes = 0;
        return w;
    }
    void *copy = weight_bytes(rows * row_bytes);
    if (!copy) goto fail;
    memcpy(copy, host, rows * row_bytes);
    w->data = copy;
    w->bytes = rows * row_bytes;
    return w;
fail:
    free(w);
    return NULL;
}

void cpu_weight_free(struct backend *be, struct weight *w)
{
    (void)be;
    if (!w) return;
    if (w->bytes) free((void *)w->data);
    free(w);
}

/* Parts the CPU can stack: owned memory (a borrowed mapping would be
 * copied into a second resident form), one held type, width and layout. */
static int joinable(struct weight *const *parts, int n)
{
    for (int i = 0; i < n; i++) {
        const struct weight *p = parts[i], *a = parts[0];
        if (!p || !p->bytes || p->view_of || p->held != a->held || p->cols != a->cols ||
            p->interleave != a->interleave || p->row_bytes != a->row_bytes ||
            (p->interleave && p->rows % p->interleave != 0))
            return 0;
    }
    return n >= 1;
}

struct weight *cpu_weight_join(struct backend *be, struct weight *const *parts, int n)
{
    (void)be;
    if (!joinable(parts, n)) return NULL;
    size_t total = 0;
    int rows = 0;
    for (int i = 0; i < n; i++) {
        if (parts[i]->rows > INT32_MAX - rows) return NULL;
        rows += parts[i]->rows;
        total += (size_t)parts[i]->rows * parts[i]->row_bytes;
    }
    struct weight *w = calloc(1, sizeof *w);
    uint8_t *data = w ? weight_bytes(total) : NULL;
    if (!data) {
        free(w);
        return NULL;
    }
    *w = *parts[0];
    w->rows = rows;
    w->bytes = total;
    w->data = data;
    for (int i = 0; i < n; i++)
        if (parts[i]->type != w->type) w->type = w->held; /* stored types differ */
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        struct weight *p = parts[i];
        size_t bytes = (size_t)p->rows * p->row_bytes;
        memcpy(data + off, p->data, bytes);
        free((void *)p->data);
        p->data = data + off;
        p->bytes = 0;
        p->view_of = w;
        off += bytes;
    }
    return w;
}

/* Room for one file-layout block of any interleaved type, rebuilt from its group. */
union any_block {
    block_q4_k q4;
    block_q6_k q6;
    block_q8_0 q8;
};

static const uint8_t *row_of(const struct weight *w, int r)
{
    return (const uint8_t *)w->data + (size_t)r * w->row_bytes;
}

/* Row r of w as f32, whatever the layout; deq (SIMD, bitwise equal to
 * quant_dequantize) when not NULL.  Interleaved rows are rebuilt one block at
 * a time on the stack, so this allocates nothing. */
static void dequantize_row(const struct weight *w, int r, float *out, qdeq_fn deq)
{
    if (!w->interleave) {
        if (deq)
            deq(row_of(w, r), out, w->cols);
        else
            quant_dequantize((int)w->held, row_of(w, r), out, w->cols);
        return;
    }
    const uint8_t *group = row_of(w, r - r % 8);
    const struct x8_kernels *x8 = x8_kernels_for(w->held);
    union any_block blk;
    int n = x8->block_elems;
    for (int b = 0; b < w->cols / n; b++) {
        x8->block(group, b, r % 8, &blk);
        if (deq)
            deq(&blk, out + (size_t)b * n, n);
        else
            quant_dequantize((int)w->held, &blk, out + (size_t)b * n, n);
    }
}

void cpu_embed_weight(struct backend *be, float *y, const struct weight *w, const int *ids, int n)
{
    (void)be;
    for (int i = 0; i < n; i++) dequantize_row(w, ids[i], y + (size_t)i * w->cols, NULL);
}

/* Grow impl scratch to at least `bytes`; 0 or -1. */
int cpu_scratch_reserve(struct cpu_impl *im, int which, size_t bytes)
{
    if (im->scratch_cap[which] >= bytes) return 0;
    free(im->scratch[which]);
    im->scratch[which] = aligned_bytes(bytes);
    im->scratch_cap[which] = im->scratch[which] ? bytes : 0;
    return im->scratch[which] ? 0 : -1;
}

/* Without scratch: dequantize a block (or 256 values of a 16-bit type) at a
 * time onto the stack and dot in f32. */
static void matmul_no_scratch(float *y, const float *x, const struct weight *w, const float *bias,
                              int m)
{
    int k = w->cols, per_block = quant_block_elems((int)w->held);
    size_t block_bytes = quant_block_bytes((int)w->held);
    float blk[256];
    for (int i = 0; i < m; i++)
        for (int r = 0; r < w->rows; r++) {
            const uint8_t *row = row_of(w, w->interleave ? r - r % 8 : r);
            const float *xr = x + (size_t)i * k;
            float s = 0.0f;
            for (int b0 = 0, len; b0 < k; b0 += len) {
                len = per_block > 1 ? per_block : (k - b0 < 256 ? k - b0 : 256);
                const void *src = row + (size_t)(b0 / per_block) * block_bytes;
                union any_block kb;
                if (w->interleave) {
                    x8_kernels_for(w->held)->block(row, b0 / per_block, r % 8, &kb);
                    src = &kb;
                }
                quant_dequantize((int)w->held, src, blk, len);
                for (int j = 0; j < len; j++) s += blk[j] * xr[b0 + j];
            }
            y[(size_t)i * w->rows + r] = s + (bias ? bias[r] : 0.0f);
        }
}

/* y[i + j][c0 + l] = o[j * ostride + l] + bias[l] (+ 0.0f without bias, as
 * ever: -0 becomes +0), j < rows, l < cols; the bias test hoisted out of
 * the loops so that they vectorize (the logits' 16 x 151,936 stores per
 * decode step show in the profile, though mostly as waits on memory).
 * acc: y += that instead (the residual add fused, the same two roundings
 * as a matmul into scratch and then cpu_add). */
static void x8_put(float *y, int n, int c0, const float *o, int ostride, int rows, int cols,
                   const float *b, int i, int acc)
{
    for (int j = 0; j < rows; j++) {
        float *yr = y + (size_t)(i + j) * n + c0;
        const float *oj = o + j * ostride;
        if (acc && b)
            for (int l = 0; l < cols; l++) yr[l] = yr[l] + (oj[l] + b[l]);
        else if (acc)
            for (int l = 0; l < cols; l++) yr[l] = yr[l] + (oj[l] + 0.0f);
        else if (b)
            for (int l = 0; l < cols; l++) yr[l] = oj[l] + b[l];
        else
            for (int l = 0; l < cols; l++) yr[l] = oj[l] + 0.0f;
    }
}

/* y's rows [i0, i1), columns of groups [gi, gi + ng): QDOT_ROWS activation
 * rows at a time, then one by one; ng = 2 takes the two groups at once
 * (dots_pair: 16 weight rows per unpack). */
static void x8_groups(const struct x8_kernels *x8, float *y, const uint8_t *act, size_t act_bytes,
                      const struct weight *w, const float *bias, int i0, int i1, int gi, int ng,
                      int acc)
{
    int n = w->rows, k = w->cols;
    size_t gb = 8 * w->row_bytes;
    const uint8_t *g = row_of(w, 8 * gi);
    const float *b = bias ? bias + 8 * gi : NULL;
    int i = i0;
    for (; i + QDOT_ROWS <= i1; i += QDOT_ROWS) {
        const uint8_t *a = act + (size_t)i * act_bytes;
        if (ng == 2) {
            float o[QDOT_ROWS][16];
            x8->dots_pair(k, g, gb, a, act_bytes, o);
            x8_put(y, n, 8 * gi, o[0], 16, QDOT_ROWS, 16, b, i, acc);
        } else {
            float o[QDOT_ROWS][8];
            x8->dots(k, g, a, act_bytes, o);
            x8_put(y, n, 8 * gi, o[0], 8, QDOT_ROWS, 8, b, i, acc);
        }
    }
    for (; i < i1; i++)
        for (int h = 0; h < ng; h++) {
            float o[8];
            x8->dot(k, g + h * gb, act + (size_t)i * act_bytes, o);
            x8_put(y, n, 8 * (gi + h), o, 8, 1, 8, b ? b + 8 * h : NULL, i, acc);
        }
}

/* Rows of y for activation rows [i0, i1) and weight groups [g0, g1): two
 * groups at a time where the set has dots_pair, else one. */
static void x8_tile(const struct x8_kernels *x8, float *y, const uint8_t *act, size_t act_bytes,
                    const struct weight *w, const float *bias, int i0, int i1, int g0, int g1,
                    int acc)
{
    for (int gi = g0; gi < g1;) {
        int ng = x8->dots_pair && gi + 1 < g1 ? 2 : 1;
        x8_groups(x8, y, act, act_bytes, w, bias, i0, i1, gi, ng, acc);
        gi += ng;
    }
}

void cpu_x8_span(float *y, const uint8_t *act, const struct weight *w, const float *bias, int m,
                 int g0, int g1, int acc)
{
    const struct x8_kernels *x8 = x8_kernels_for(w->held);
    size_t act_bytes = qact_row_bytes((enum qact_kind)qact_kind_of(w->held), w->cols);
    for (int i0 = 0; i0 < m; i0 += X8_ROW_BLOCK) {
        int i1 = i0 + X8_ROW_BLOCK < m ? i0 + X8_ROW_BLOCK : m;
        x8_tile(x8, y, act, act_bytes, w, bias, i0, i1, g0, g1, acc);
    }
}

int cpu_x8_chunk_groups(const struct weight *w, int nt)
{
    int groups = w->rows / 8, per = nt > 0 ? groups / (nt * X8_CHUNKS_PER_THREAD) : groups;
    if (per < 1) per = 1;
    const struct x8_kernels *x8 = x8_kernels_for(w->held);
    if (x8->dots_pair && per > 1) per &= ~1; /* whole pairs of groups per chunk */
    else if (x8->dots_pair && groups > 2 * nt) per = 2;
    return per;
}

/* The integer path over 8-row groups (interleaved weights), in one job: the
 * threads quantize x's rows, then take chunks of groups as they come free
 * (dynamic), so a thread the OS preempts delays the call by one chunk, not
 * by half the matmul; about X8_CHUNKS_PER_THREAD chunks each, a chunk being
 * a contiguous stretch of the weights.  Up to X8_OWN_QUANT_M rows (decode)
 * every thread quantizes all of x into its own copy (microseconds) instead of
 * splitting the rows and meeting at a barrier: on a busy machine a barrier
 * waits for the other thread's next time slice. */
struct x8_job {
    struct cpu_pool *pool;
    float *y;
    const float *x;
    enum qact_kind kind;
    const struct weight *w;
    const float *bias;
    int m, own, per, chunks;
    size_t act_bytes;
    uint8_t *q;
    atomic_int next;
};

static void x8_job_run(void *ctx, int ith, int nth)
{
    struct x8_job *j = ctx;
    int k = j->w->cols, groups = j->w->rows / 8;
    uint8_t *qt = j->q;
    if (j->own) {
        qt = j->q + (size_t)ith * j->m * j->act_bytes;
        for (int i = 0; i < j->m; i++)
            qact_quantize_row(j->kind, j->x + (size_t)i * k, qt + (size_t)i * j->act_bytes, k);
    } else {
        int i0, i1;
        cpu_pool_share(j->m, ith, nth, &i0, &i1);
        for (int i = i0; i < i1; i++)
            qact_quantize_row(j->kind, j->x + (size_t)i * k, qt + (size_t)i * j->act_bytes, k);
        cpu_pool_barrier(j->pool, nth);
    }
    for (int c; (c = cpu_pool_chunk(&j->next, j->chunks)) >= 0;) {
        int g0 = c * j->per, g1 = g0 + j->per < groups ? g0 + j->per : groups;
        cpu_x8_span(j->y, qt, j->w, j->bias, j->m, g0, g1, 0);
    }
}

/* Returns -1 when the scratch cannot grow. */
static int matmul_x8(struct cpu_impl *im, float *y, const float *x, enum qact_kind kind,
                     const struct weight *w, const float *bias, int m, int nt)
{
    int n = w->rows, k = w->cols, groups = n / 8;
    size_t act_bytes = qact_row_bytes(kind, k), rows_bytes = (size_t)m * act_bytes;
    int own = m <= X8_OWN_QUANT_M;
    if (cpu_scratch_reserve(im, 0, own ? (size_t)nt * rows_bytes : rows_bytes)) return -1;
    int par = nt > 1 && groups > 1 && (double)m * n * k >= CPU_PARALLEL_MIN * 8.0;
    int per = cpu_x8_chunk_groups(w, par ? nt : 0);
    struct x8_job j = {im->pool, y, x, kind, w, bias, m, own, per, (groups + per - 1) / per,
                       act_bytes, im->scratch[0], 0};
    cpu_pool_run(im->pool, par ? nt : 1, x8_job_run, &j);
    return 0;
}

/* Rows [i0, i1) of x quantized into q (and back to f32 into xr when not NULL). */
struct quant_job {
    enum qact_kind kind;
    const float *x;
    int k;
    size_t act_bytes;
    uint8_t *q;
    float *xr;
};

static void quantize_rows(void *ctx, int i0, int i1, int ith)
{
    (void)ith;
    const struct quant_job *j = ctx;
    for (int i = i0; i < i1; i++) {
        uint8_t *qi = j->q + (size_t)i * j->act_bytes;
        qact_quantize_row(j->kind, j->x + (size_t)i * j->k, qi, j->k);
        if (j->xr) qact_dequantize_row(j->kind, qi, j->xr + (size_t)i * j->k, j->k);
    }
}

struct qdot_job {
    float *y;
    const uint8_t *act;
    size_t act_bytes;
    const struct weight *w;
    const float *bias;
    int m;
    qdot_fn dot;
    qdot_rows_fn dots;
};

/* Tiles [t0, t1) of TILE_ROWS weight rows, each dotted with all m rows of x. */
static void qdot_tiles(void *ctx, int t0, int t1, int ith)
{
    (void)ith;
    const struct qdot_job *j = ctx;
    int n = j->w->rows, k = j->w->cols, m = j->m;
    int r1 = t1 * TILE_ROWS < n ? t1 * TILE_ROWS : n;
    for (int r = t0 * TILE_ROWS; r < r1; r++) {
        const uint8_t *wr = row_of(j->w, r);
        float b = j->bias ? j->bias[r] : 0.0f;
        int i = 0;
        if (j->dots)
            for (; i + QDOT_ROWS <= m; i += QDOT_ROWS) {
                float o[QDOT_ROWS];
                j->dots(k, wr, j->act + (size_t)i * j->act_bytes, j->act_bytes, o);
                for (int l = 0; l < QDOT_ROWS; l++) j->y[(size_t)(i + l) * n + r] = o[l] + b;
            }
        for (; i < m; i++)
            j->y[(size_t)i * n + r] = j->dot(k, wr, j->act + (size_t)i * j->act_bytes) + b;
    }
}

static void matmul_qdot(struct backend *be, float *y, const float *x, const struct weight *w,
                        const float *bias, int m)
{
    struct cpu_impl *im = be->impl;
    int n = w->rows, k = w->cols;
    enum qact_kind kind = (enum qact_kind)qact_kind_of(w->held);
    qdot_fn dot = qdot_for(w->held, im->simd);
    /* QDOT_ROWS x rows per weight-row unpack; the rest one at a time */
    qdot_rows_fn dots = kind == QACT_F32 ? NULL : qdot_rows_for(w->held, im->simd);
    size_t act_bytes = qact_row_bytes(kind, k);
    const uint8_t *act = (const uint8_t *)x;
    int nt = cpu_threads(be);
    if (kind != QACT_F32) {
        if (w->interleave && matmul_x8(im, y, x, kind, w, bias, m, nt) == 0) return;
        if (w->interleave || cpu_scratch_reserve(im, 0, (size_t)m * act_bytes)) {
            matmul_no_scratch(y, x, w, bias, m);
            return;
        }
        struct quant_job qj = {kind, x, k, act_bytes, im->scratch[0], NULL};
        cpu_parallel_for(be, m, 1, nt > 1 && m >= 8, quantize_rows, &qj);
        act = im->scratch[0];
    }
    int tiles = (n + TILE_ROWS - 1) / TILE_ROWS;
    double work = (double)m * n * k;
    struct qdot_job j = {y, act, act_bytes, w, bias, m, dot, dots};
    cpu_parallel_for(be, tiles, (tiles + nt - 1) / nt,
                     nt > 1 && tiles > 1 && work >= CPU_PARALLEL_MIN * 8.0, qdot_tiles, &j);
}

struct panel_job {
    float *y;
    const float *x;
    const struct weight *w;
    int m;
    float beta;
    float *scratch;      /* per thread: one panel of PANEL_ROWS x k floats */
    size_t panel;
    qdeq_fn deq;
};

/* Panels [p0, p1): PANEL_ROWS weight rows to f32 in the thread's scratch, then sgemm. */
static void panel_rows(void *ctx, int p0, int p1, int ith)
{
    const struct panel_job *j = ctx;
    int n = j->w->rows, k = j->w->cols;
    float *f = j->scratch + (size_t)ith * j->panel;
    for (int p = p0; p < p1; p++) {
        int r0 = p * PANEL_ROWS, rn = r0 + PANEL_ROWS < n ? PANEL_ROWS : n - r0;
        for (int r = 0; r < rn; r++) dequantize_row(j->w, r0 + r, f + (size_t)r * k, j->deq);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, j->m, rn, k, 1.0f, j->x, k, f, k,
                    j->beta, j->y + r0, n);
    }
}

static void matmul_panels(struct backend *be, float *y, const float *x, const struct weight *w,
                          const float *bias, int m)
{
    struct cpu_impl *im = be->impl;
    int n = w->rows, k = w->cols, nt = cpu_threads(be);
    size_t panel = (size_t)PANEL_ROWS * k;
    enum qact_kind kind = (enum qact_kind)qact_kind_of(w->held);
    size_t act_bytes = qact_row_bytes(kind, k);
    if (cpu_scratch_reserve(im, 1, (size_t)nt * panel * sizeof(float) + (size_t)m * k * sizeof(float)) ||
        (kind != QACT_F32 && cpu_scratch_reserve(im, 0, (size_t)m * act_bytes))) {
        matmul_qdot(be, y, x, w, bias, m);
        return;
    }
    /* x rounded as the integer kernels round it: quantized, then back to f32 */
    float *xr = (float *)im->scratch[1] + (size_t)nt * panel;
    if (kind != QACT_F32) {
        struct quant_job qj = {kind, x, k, act_bytes, im->scratch[0], xr};
        cpu_parallel_for(be, m, 1, nt > 1, quantize_rows, &qj);
        x = xr;
    }
    if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
    if (bias)
        for (int i = 0; i < m; i++) memcpy(y + (size_t)i * n, bias, (size_t)n * sizeof(float));
    struct panel_job j = {y, x, w, m, bias ? 1.0f : 0.0f, im->scratch[1], panel,
                          im->simd == CPU_SIMD_AVX2 ? qdeq_avx2(w->held) : NULL};
    int panels = (n + PANEL_ROWS - 1) / PANEL_ROWS;
    cpu_parallel_for(be, panels, 1, nt > 1 && panels > 1, panel_rows, &j);
}

void cpu_matmul(struct backend *be, float *y, const float *x, const struct weight *w,
                const float *bias, int m)
{
    if (m <= 0) return;
    struct cpu_impl *im = be->impl;
    if (w->held == WEIGHT_F32) {
        cpu_gemm(be, y, x, w->data, bias, m, w->rows, w->cols);
        return;
    }
    /* interleaved weights: the integer kernels beat the panels at every m
     * (measured 1.05-7x per row, m = 16..256, Q4_0/Q4_1/Q8_0/Q4_K/Q6_K) */
    if (m >= im->panel_min_m && !w->interleave)
        matmul_panels(be, y, x, w, bias, m);
    else
        matmul_qdot(be, y, x, w, bias, m);
}
