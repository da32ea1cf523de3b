/* cpu_layer.c - a layer's ops in two parallel jobs (backend.layer_in,
 * backend.layer_out) instead of one job per op.
 *
 * Per decode step and layer the single ops cost about 16 jobs, each ending
 * in a wait for the slowest thread; on a shared core that wait is where a
 * preempted thread's time goes.  Here a layer's attention input is one job
 * without a barrier (q and k are computed in chunks of whole heads, which the
 * same thread then norms and rotates), and the rest of the layer one job
 * with two (after the output projection's residual add, after the gate and
 * up products).  What the single ops did between those points each thread
 * does for itself:
 *  - every thread normalises and quantizes all activation rows into its own
 *    copy (up to OWN_ROWS rows, microseconds) instead of splitting the rows
 *    and meeting at a barrier; above that the rows are split, with a barrier;
 *  - the residual adds are the products' epilogues (x += W a, cpu_x8_span's
 *    acc), and SwiGLU runs on each chunk of gate and up columns as soon as
 *    the chunk's thread has both.
 * The arithmetic is the single ops', in the same order per element, so the
 * result is the same bit for bit (tests/test_layerfuse.c).  Served: weights
 * held interleaved (cpu_weight.c's 8-row groups), the quantized models
 * sweeps run; anything else returns 1 and model/ runs the single ops.
 * EVICTBENCH_CPU_FUSED=0 turns it off (for comparisons). */
#include "kernels/cpu/cpu_ops.h"

#include <stdlib.h>
#include <string.h>

enum { OWN_ROWS = 32 };

static int served(const struct weight *w)
{
    return w && w->interleave == 8 && x8_kernels_for(w->held) &&
           qact_kind_of(w->held) != QACT_F32;
}

static int fused_off(void)
{
    const char *s = getenv("EVICTBENCH_CPU_FUSED");
    return s && s[0] == '0';
}

/* Threads for a block of `macs` multiply-adds: one below the single ops'
 * threshold (a job costs more than it saves), unless EVICTBENCH_CPU_FUSED=all
 * (tests: the threaded path on tiny fixtures). */
static int threads_for(const struct cpu_impl *im, double macs)
{
    const char *s = getenv("EVICTBENCH_CPU_FUSED");
    if (s && strcmp(s, "all") == 0) return im->n_threads;
    return macs >= CPU_PARALLEL_MIN * 8.0 ? im->n_threads : 1;
}

/* Up to three products of one activation, their chunks laid end to end. */
struct products {
    int n;
    const struct weight *w[3];
    float *y[3];
    const float *bias[3];
    int acc;
    int per[3], start[4];        /* groups per chunk; first chunk of each product */
    enum qact_kind kind[3];
    int act[3];                  /* which quantized copy product i reads (0 or 1) */
    enum qact_kind act_kind[2];
    int n_act;
};

static void products_plan(struct products *p, int nt)
{
    p->start[0] = 0;
    p->n_act = 0;
    for (int i = 0; i < p->n; i++) {
        p->per[i] = cpu_x8_chunk_groups(p->w[i], nt);
        int groups = p->w[i]->rows / 8;
        p->start[i + 1] = p->start[i] + (groups + p->per[i] - 1) / p->per[i];
        p->kind[i] = (enum qact_kind)qact_kind_of(p->w[i]->held);
        int a = 0;
        while (a < p->n_act && p->act_kind[a] != p->kind[i]) a++;
        if (a == p->n_act) p->act_kind[p->n_act++] = p->kind[i];
        p->act[i] = a;
    }
}

/* Product i in chunks of per groups (the later products' chunks move up). */
static void products_chunk_as(struct products *p, int i, int per)
{
    p->per[i] = per;
    for (int t = i; t < p->n; t++) {
        int groups = p->w[t]->rows / 8;
        p->start[t + 1] = p->start[t] + (groups + p->per[t] - 1) / p->per[t];
    }
}

/* Quantized copies of rows [i0, i1) of x (k wide) for each kind p needs. */
static void quantize(const struct products *p, const float *x, int k, int i0, int i1,
                     uint8_t *const act[2])
{
    for (int a = 0; a < p->n_act; a++) {
        size_t ab = qact_row_bytes(p->act_kind[a], k);
        for (int i = i0; i < i1; i++)
            qact_quantize_row(p->act_kind[a], x + (size_t)i * k, act[a] + (size_t)i * ab, k);
    }
}

/* Chunk c of p's combined chunks, for all m rows. */
static void product_chunk(const struct products *p, int c, int m, uint8_t *const act[2])
{
    int i = 0;
    while (c >= p->start[i + 1]) i++;
    int groups = p->w[i]->rows / 8, g0 = (c - p->start[i]) * p->per[i];
    int g1 = g0 + p->per[i] < groups ? g0 + p->per[i] : groups;
    cpu_x8_span(p->y[i], act[p->act[i]], p->w[i], p->bias[i], m, g0, g1, p->acc);
}

/* Per-thread scratch: two quantized copies of up to m rows of the widest
 * activation, and one f32 row; or one shared set when the rows are split. */
struct scratch {
    size_t act_bytes;            /* one copy of m rows */
    size_t per_thread;
    uint8_t *base;
};

static int scratch_plan(struct cpu_impl *im, struct scratch *s, int m, int kmax, int own)
{
    int kr = (kmax + 255) / 256 * 256;
    s->act_bytes = (size_t)m * qact_row_bytes(QACT_Q8_32, kr);
    size_t q256 = (size_t)m * qact_row_bytes(QACT_Q8_256, kr);
    if (q256 > s->act_bytes) s->act_bytes = q256;
    s->act_bytes = (s->act_bytes + 63) / 64 * 64;
    s->per_thread = 2 * s->act_bytes + ((size_t)kmax * sizeof(float) + 63) / 64 * 64;
    if (cpu_scratch_reserve(im, 2, s->per_thread * (own ? (size_t)im->n_threads : 1))) return -1;
    s->base = im->scratch[2];
    return 0;
}

static void scratch_of(const struct scratch *s, int ith, int own, uint8_t *act[2], float **row)
{
    uint8_t *b = s->base + (own ? (size_t)ith * s->per_thread : 0);
    act[0] = b;
    act[1] = b + s->act_bytes;
    *row = (float *)(b + 2 * s->act_bytes);
}

/* ---- layer_in ---- */

struct in_job {
    struct cpu_pool *pool;
    const struct layer_in_args *a;
    struct products qkv;
    struct scratch sc;
    int own;
    atomic_int next;
};

/* Rows [i0, i1) of xb = rmsnorm(x), quantized for the products. */
static void norm_rows(const struct products *p, const float *x, const float *w, float eps, int k,
                      int i0, int i1, float *xb, float *row, uint8_t *const act[2])
{
    for (int i = i0; i < i1; i++) {
        float *y = xb ? xb + (size_t)i * k : row;
        cpu_rmsnorm_row(y, x + (size_t)i * k, w, k, eps);
        for (int a = 0; a < p->n_act; a++)
            qact_quantize_row(p->act_kind[a], y, act[a] + (size_t)i * qact_row_bytes(p->act_kind[a], k), k);
    }
}

/* Heads [h0, h1) of q (is_k 0) or k of every row: per-head norm, then RoPE. */
static void rope_heads(const struct layer_in_args *a, int is_k, int h0, int h1)
{
    int heads = is_k ? a->n_kv : a->n_head;
    const float *norm = is_k ? a->k_norm : a->q_norm;
    for (int r = 0; r < a->rows; r++) {
        float *row = (is_k ? a->k : a->q) + ((size_t)r * heads + h0) * a->head_dim;
        if (norm)
            for (int h = 0; h < h1 - h0; h++) {
                float *xh = row + (size_t)h * a->head_dim;
                cpu_rmsnorm_row(xh, xh, norm, a->head_dim, a->eps);
            }
        /* the CPU's backend memory is host memory: either form reads alike */
        const int *pos = a->pos_dev ? a->pos_dev : a->pos;
        const float *inv_freq = a->inv_freq_dev ? a->inv_freq_dev : a->inv_freq;
        cpu_rope_row(row, h1 - h0, a->head_dim, pos[r], inv_freq, a->pairing);
    }
}

/* Chunk c of q, k and v; a chunk of q or k is whole heads, normed and
 * rotated by the thread that computed them (no barrier before RoPE). */
static void in_chunk(const struct in_job *j, int c, uint8_t *const act[2])
{
    const struct products *p = &j->qkv;
    product_chunk(p, c, j->a->rows, act);
    int i = 0;
    while (c >= p->start[i + 1]) i++;
    if (i == 2) return; /* v */
    int heads = i ? j->a->n_kv : j->a->n_head, per_head = j->a->head_dim / 8;
    int h0 = (c - p->start[i]) * p->per[i] / per_head, h1 = h0 + p->per[i] / per_head;
    rope_heads(j->a, i, h0, h1 < heads ? h1 : heads);
}

static void in_run(void *ctx, int ith, int nth)
{
    struct in_job *j = ctx;
    const struct layer_in_args *a = j->a;
    int m = a->rows, k = a->n_embd;
    uint8_t *act[2];
    float *row;
    scratch_of(&j->sc, ith, j->own, act, &row);
    if (j->own) {
        norm_rows(&j->qkv, a->x, a->attn_norm, a->eps, k, 0, m, NULL, row, act);
    } else {
        int i0, i1;
        cpu_pool_share(m, ith, nth, &i0, &i1);
        norm_rows(&j->qkv, a->x, a->attn_norm, a->eps, k, i0, i1, a->xb, row, act);
        cpu_pool_barrier(j->pool, nth);
    }
    for (int c; (c = cpu_pool_chunk(&j->next, j->qkv.start[j->qkv.n])) >= 0;) in_chunk(j, c, act);
}

/* Heads per chunk of a product of `heads` heads: about X8-sized chunks, at
 * least one head. */
static int heads_per_chunk(const struct weight *w, int heads, int nt)
{
    int per = cpu_x8_chunk_groups(w, nt), per_head = w->rows / heads / 8;
    int h = per / per_head;
    return h < 1 ? 1 : h;
}

int cpu_layer_in(struct backend *be, const struct layer_in_args *a)
{
    struct cpu_impl *im = be->impl;
    if (fused_off() || a->rows < 1 || !served(a->wq) || !served(a->wk) || !served(a->wv) ||
        a->wq->cols != a->n_embd || a->wk->cols != a->n_embd || a->wv->cols != a->n_embd ||
        a->head_dim % 16 != 0 || a->wq->rows != a->n_head * a->head_dim ||
        a->wk->rows != a->n_kv * a->head_dim || (!a->q_norm) != (!a->k_norm))
        return 1;
    struct in_job j = {.pool = im->pool, .a = a, .own = a->rows <= OWN_ROWS};
    j.qkv = (struct products){.n = 3, .w = {a->wq, a->wk, a->wv}, .y = {a->q, a->k, a->v},
                              .bias = {a->bq, a->bk, a->bv}};
    products_plan(&j.qkv, im->n_threads);
    /* q and k in chunks of whole heads; an even number of groups each, so
     * that pairs of groups fall as cpu_matmul pairs them */
    int hq = heads_per_chunk(a->wq, a->n_head, im->n_threads);
    int hk = heads_per_chunk(a->wk, a->n_kv, im->n_threads);
    products_chunk_as(&j.qkv, 0, hq * a->head_dim / 8);
    products_chunk_as(&j.qkv, 1, hk * a->head_dim / 8);
    if (scratch_plan(im, &j.sc, a->rows, a->n_embd, j.own)) return 1;
    double macs = (double)a->rows * a->n_embd * (a->wq->rows + a->wk->rows + a->wv->rows);
    cpu_pool_run(im->pool, threads_for(im, macs), in_run, &j);
    /* The append, asked for, is kv_append's own: a CPU has nothing to save by
     * fusing it, and its rows are then the same by construction. */
    if (a->tab) return cpu_kv_append(be, a->tab, a->layer, a->k, a->v, a->q) ? -1 : 0;
    return 0;
}

/* ---- layer_out ---- */

struct out_job {
    struct cpu_pool *pool;
    const struct layer_out_args *a;
    struct products o, gu, down;  /* gu: gate and up, taken a chunk of both at a time */
    struct scratch sc;
    int own;
    enum cpu_simd simd;           /* SwiGLU's kernel */
    atomic_int next_o, next_gu, next_down;
};

/* Chunk c of gate and up (the same groups of each), then SwiGLU on its columns. */
static void gate_up_chunk(const struct out_job *j, int c, int m, uint8_t *const act[2])
{
    const struct products *p = &j->gu;
    const struct layer_out_args *a = j->a;
    int groups = a->w_gate->rows / 8, g0 = c * p->per[0];
    int g1 = g0 + p->per[0] < groups ? g0 + p->per[0] : groups;
    cpu_x8_span(a->hb, act[p->act[0]], a->w_gate, NULL, m, g0, g1, 0);
    cpu_x8_span(a->hb2, act[p->act[1]], a->w_up, NULL, m, g0, g1, 0);
    for (int i = 0; i < m; i++) {
        size_t off = (size_t)i * a->n_ff + 8 * (size_t)g0;
        cpu_swiglu_span(j->simd, a->hb + off, a->hb + off, a->hb2 + off, 8 * (size_t)(g1 - g0));
    }
}

/* Quantize rows of x (k wide) for p: all rows into this thread's copy, or
 * this thread's share into the shared copy and wait for the rest. */
static void quantize_phase(const struct out_job *j, const struct products *p, const float *x,
                           int k, int ith, int nth, uint8_t *const act[2])
{
    int m = j->a->rows;
    if (j->own) {
        quantize(p, x, k, 0, m, act);
        return;
    }
    int i0, i1;
    cpu_pool_share(m, ith, nth, &i0, &i1);
    quantize(p, x, k, i0, i1, act);
    cpu_pool_barrier(j->pool, nth);
}

static void out_run(void *ctx, int ith, int nth)
{
    struct out_job *j = ctx;
    const struct layer_out_args *a = j->a;
    int m = a->rows, d = a->n_embd;
    uint8_t *act[2];
    float *row;
    scratch_of(&j->sc, ith, j->own, act, &row);
    quantize_phase(j, &j->o, a->att, a->wo->cols, ith, nth, act);
    for (int c; (c = cpu_pool_chunk(&j->next_o, j->o.start[1])) >= 0;) product_chunk(&j->o, c, m, act);
    cpu_pool_barrier(j->pool, nth);
    if (j->own) {
        norm_rows(&j->gu, a->x, a->ffn_norm, a->eps, d, 0, m, NULL, row, act);
    } else {
        int i0, i1;
        cpu_pool_share(m, ith, nth, &i0, &i1);
        norm_rows(&j->gu, a->x, a->ffn_norm, a->eps, d, i0, i1, a->xb, row, act);
        cpu_pool_barrier(j->pool, nth);
    }
    int gu_chunks = (a->w_gate->rows / 8 + j->gu.per[0] - 1) / j->gu.per[0];
    for (int c; (c = cpu_pool_chunk(&j->next_gu, gu_chunks)) >= 0;) gate_up_chunk(j, c, m, act);
    cpu_pool_barrier(j->pool, nth);
    quantize_phase(j, &j->down, a->hb, a->n_ff, ith, nth, act);
    for (int c; (c = cpu_pool_chunk(&j->next_down, j->down.start[1])) >= 0;)
        product_chunk(&j->down, c, m, act);
}

int cpu_layer_out(struct backend *be, const struct layer_out_args *a)
{
    struct cpu_impl *im = be->impl;
    if (fused_off() || a->rows < 1 || !served(a->wo) || !served(a->w_gate) || !served(a->w_up) ||
        !served(a->w_down) || a->wo->rows != a->n_embd || a->w_down->rows != a->n_embd ||
        a->w_gate->rows != a->n_ff || a->w_up->rows != a->n_ff || a->w_down->cols != a->n_ff ||
        a->w_gate->cols != a->n_embd || a->w_up->cols != a->n_embd)
        return 1;
    int nt = im->n_threads;
    struct out_job j = {.pool = im->pool, .a = a, .own = a->rows <= OWN_ROWS, .simd = im->simd};
    j.o = (struct products){.n = 1, .w = {a->wo}, .y = {a->x}, .acc = 1};
    j.gu = (struct products){.n = 2, .w = {a->w_gate, a->w_up}, .y = {a->hb, a->hb2}};
    j.down = (struct products){.n = 1, .w = {a->w_down}, .y = {a->x}, .acc = 1};
    products_plan(&j.o, nt);
    products_plan(&j.gu, nt);
    products_plan(&j.down, nt);
    int kmax = a->wo->cols > a->n_ff ? a->wo->cols : a->n_ff;
    if (kmax < a->n_embd) kmax = a->n_embd;
    if (scratch_plan(im, &j.sc, a->rows, kmax, j.own)) return 1;
    double macs = (double)a->rows * ((double)a->wo->cols * a->n_embd + 3.0 * a->n_ff * a->n_embd);
    cpu_pool_run(im->pool, threads_for(im, macs), out_run, &j);
    return 0;
}

void cpu_thread_syncs(const struct backend *be, unsigned long *jobs, unsigned long *barriers)
{
    struct cpu_pool_counts c;
    cpu_pool_counts(((const struct cpu_impl *)be->impl)->pool, &c);
    *jobs = c.jobs;
    *barriers = c.barriers;
}
