/* backend_tally.c - the memory tally of a backend (kernels/backend.h,
 * "tally"): every alloc's bytes, rounded up as the CUDA device pool rounds
 * them, live and at the peak.  Over a real backend it forwards everything
 * (the wrapper is a copy of the inner vtable with alloc, free and destroy
 * replaced, so every other op runs on the inner backend's own state).  With
 * no inner backend it is tally-only: alloc reserves address space that is
 * never touched (PROT_NONE, no swap reserved), compute does nothing and a
 * download reads zeros, so a 7B-shaped generate can be planned on a laptop. */
#include "kernels/backend.h"
#include "kernels/quant.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

struct tally_block {
    void *p;
    size_t bytes;  /* as tallied (rounded) */
    size_t mapped; /* tally-only: the mapping's length, else 0 */
};

struct tally {
    struct backend be; /* first: a struct backend * to the wrapper is a struct tally * */
    struct backend *inner;
    struct tally_block *blocks;
    int n_blocks, cap_blocks;
    struct backend_tally_usage use;
};

static struct tally *tally_of(struct backend *be)
{
    return (struct tally *)be;
}

static int remember(struct tally *t, void *p, size_t bytes, size_t mapped)
{
    if (t->n_blocks == t->cap_blocks) {
        int cap = t->cap_blocks ? 2 * t->cap_blocks : 256;
        struct tally_block *b = realloc(t->blocks, (size_t)cap * sizeof *b);
        if (!b) return -1;
        t->blocks = b;
        t->cap_blocks = cap;
    }
    t->blocks[t->n_blocks++] = (struct tally_block){p, bytes, mapped};
    t->use.live += bytes;
    t->use.allocs++;
    if (t->use.live > t->use.peak) t->use.peak = t->use.live;
    return 0;
}

static float *tally_alloc(struct backend *be, size_t n_floats)
{
    struct tally *t = tally_of(be);
    if (n_floats > ((size_t)-1) / sizeof(float) / 2) return NULL;
    size_t bytes = backend_alloc_bytes(n_floats);
    void *p;
    size_t mapped = 0;
    if (t->inner) {
        p = t->inner->alloc(t->inner, n_floats);
        if (!p) return NULL;
    } else {
        mapped = bytes;
        p = mmap(NULL, mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) return NULL;
    }
    if (remember(t, p, bytes, mapped)) {
        if (t->inner) t->inner->free(t->inner, p);
        else munmap(p, mapped);
        return NULL;
    }
    return p;
}

static void tally_free(struct backend *be, float *p)
{
    struct tally *t = tally_of(be);
    if (!p) return;
    for (int i = t->n_blocks - 1; i >= 0; i--) {
        if (t->blocks[i].p != p) continue;
        t->use.live -= t->blocks[i].bytes;
        if (t->inner) t->inner->free(t->inner, p);
        else munmap(p, t->blocks[i].mapped);
        t->blocks[i] = t->blocks[--t->n_blocks];
        return;
    }
    if (t->inner) t->inner->free(t->inner, p); /* not ours to count: still freed */
}

static void tally_destroy(struct backend *be)
{
    struct tally *t = tally_of(be);
    for (int i = 0; i < t->n_blocks && !t->inner; i++) munmap(t->blocks[i].p, t->blocks[i].mapped);
    if (t->inner) t->inner->destroy(t->inner);
    free(t->blocks);
    free(t);
}

/* ---- tally-only: every op does nothing (downloads read zeros) ---- */

static void null_move(struct backend *be, float *dst, const float *src, size_t n)
{
    (void)be, (void)dst, (void)src, (void)n;
}

static void null_download(struct backend *be, float *dst_host, const float *src, size_t n)
{
    (void)be, (void)src;
    memset(dst_host, 0, n * sizeof *dst_host);
}

static void null_fill(struct backend *be, float *dst, float value, size_t n)
{
    (void)be, (void)dst, (void)value, (void)n;
}

static void null_gemm(struct backend *be, float *y, const float *x, const float *w,
                      const float *bias, int m, int n, int k)
{
    (void)be, (void)y, (void)x, (void)w, (void)bias, (void)m, (void)n, (void)k;
}

static void null_rmsnorm(struct backend *be, float *y, const float *x, const float *w, int rows,
                         int dim, float eps)
{
    (void)be, (void)y, (void)x, (void)w, (void)rows, (void)dim, (void)eps;
}

static void null_rope(struct backend *be, float *x, int rows, int n_heads, int head_dim,
                      const int *pos, const float *inv_freq, enum rope_pairing pairing)
{
    (void)be, (void)x, (void)rows, (void)n_heads, (void)head_dim, (void)pos, (void)inv_freq;
    (void)pairing;
}

static void null_swiglu(struct backend *be, float *y, const float *gate, const float *up, size_t n)
{
    (void)be, (void)y, (void)gate, (void)up, (void)n;
}

static void null_embed(struct backend *be, float *y, const float *table, const int *ids, int n,
                       int dim)
{
    (void)be, (void)y, (void)table, (void)ids, (void)n, (void)dim;
}

static void null_attention(struct backend *be, const struct attn_args *a)
{
    (void)be, (void)a;
}

static struct weight *null_weight_create(struct backend *be, enum weight_type type, int rows,
                                         int cols, const void *host, int borrow, int as_f32)
{
    (void)be, (void)host, (void)borrow;
    struct weight *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->type = type;
    w->held = as_f32 ? WEIGHT_F32 : type;
    w->rows = rows;
    w->cols = cols;
    w->row_bytes = quant_row_bytes((int)w->held, cols);
    return w;
}

static void null_weight_free(struct backend *be, struct weight *w)
{
    (void)be;
    free(w);
}

static void null_matmul(struct backend *be, float *y, const float *x, const struct weight *w,
                        const float *bias, int m)
{
    (void)be, (void)y, (void)x, (void)w, (void)bias, (void)m;
}

static void null_embed_weight(struct backend *be, float *y, const struct weight *w, const int *ids,
                              int n)
{
    (void)be, (void)y, (void)w, (void)ids, (void)n;
}

static int null_window_scores(struct backend *be, const struct window_score_args *a)
{
    (void)be, (void)a;
    return 0;
}

static int null_pool1d(struct backend *be, float *out, const float *in, int n, int kernel,
                       enum score_pool mode)
{
    (void)be, (void)out, (void)in, (void)n, (void)kernel, (void)mode;
    return 0;
}

static int null_key_redundancy(struct backend *be, const struct redundancy_args *a)
{
    (void)be, (void)a;
    return 0;
}

static int null_row_range(struct backend *be, float *out, const float *x, int n, int dim)
{
    (void)be, (void)out, (void)x, (void)n, (void)dim;
    return 0;
}

static int null_sample(struct backend *be, int *tokens, const float *logits, int n_rows,
                       int n_vocab, const struct sample_row *rows)
{
    (void)be, (void)logits, (void)n_vocab, (void)rows;
    memset(tokens, 0, (size_t)n_rows * sizeof *tokens); /* token 0: what zero logits give */
    return 0;
}

static void null_kv_store(struct backend *be, void *dst, enum kv_type type, const float *src,
                          const int *rows, int n, int dim)
{
    (void)be, (void)dst, (void)type, (void)src, (void)rows, (void)n, (void)dim;
}

static void null_kv_load(struct backend *be, float *dst, const void *src, enum kv_type type,
                         size_t n)
{
    (void)be, (void)dst, (void)src, (void)type, (void)n;
}

static struct kv_table *null_table_create(struct backend *be, int max_seqs, int n_layer, int n_kv,
                                          int n_head, int head_dim)
{
    (void)be, (void)max_seqs, (void)n_layer, (void)n_kv, (void)n_head, (void)head_dim;
    return malloc(1); /* opaque and never read */
}

static void null_table_free(struct backend *be, struct kv_table *t)
{
    (void)be;
    free(t);
}

static int null_table_bind(struct backend *be, struct kv_table *t, int slot,
                           const struct kv_seq_desc *d)
{
    (void)be, (void)t, (void)slot, (void)d;
    return 0;
}

static int null_table_step(struct backend *be, struct kv_table *t, int n_seq,
                           const struct kv_step_seq *seqs)
{
    (void)be, (void)t, (void)n_seq, (void)seqs;
    return 0;
}

static int null_kv_append(struct backend *be, struct kv_table *t, int layer, const float *k,
                          const float *v, const float *q)
{
    (void)be, (void)t, (void)layer, (void)k, (void)v, (void)q;
    return 0;
}

static int null_attention_layer(struct backend *be, struct kv_table *t,
                                const struct attn_layer_args *a)
{
    (void)be, (void)t, (void)a;
    return 0;
}

static void null_ops(struct backend *be)
{
    be->name = "tally";
    be->upload = null_move;
    be->download = null_download;
    be->copy = null_move;
    be->fill = null_fill;
    be->gemm = null_gemm;
    be->rmsnorm = null_rmsnorm;
    be->rope = null_rope;
    be->swiglu = null_swiglu;
    be->add = null_move;
    be->embed = null_embed;
    be->gather_rows = null_embed;
    be->attention = null_attention;
    be->weight_create = null_weight_create;
    be->weight_free = null_weight_free;
    be->matmul = null_matmul;
    be->embed_weight = null_embed_weight;
    be->embed_weight_dev = null_embed_weight;
    be->window_scores = null_window_scores;
    be->pool1d = null_pool1d;
    be->key_redundancy = null_key_redundancy;
    be->row_range = null_row_range;
    be->sample = null_sample;
    be->kv_store = null_kv_store;
    be->kv_load = null_kv_load;
    be->kv_table_create = null_table_create;
    be->kv_table_free = null_table_free;
    be->kv_table_bind = null_table_bind;
    be->kv_table_step = null_table_step;
    be->kv_append = null_kv_append;
    be->attention_layer = null_attention_layer;
}

struct backend *backend_tally_create(struct backend *inner)
{
    struct tally *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    if (inner) t->be = *inner; /* the inner ops, on the inner state (be->impl) */
    else null_ops(&t->be);
    t->inner = inner;
    t->be.alloc = tally_alloc;
    t->be.free = tally_free;
    t->be.destroy = tally_destroy;
    return &t->be;
}

struct backend_tally_usage backend_tally_read(const struct backend *be)
{
    if (be->alloc != tally_alloc) return (struct backend_tally_usage){0};
    return ((const struct tally *)be)->use;
}

void backend_tally_reset_peak(struct backend *be)
{
    if (be->alloc != tally_alloc) return;
    struct tally *t = tally_of(be);
    t->use.peak = t->use.live;
    t->use.allocs = 0;
}
