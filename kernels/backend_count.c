/* backend_count.c - a backend that forwards every call to another and counts
 * them (kernels/backend.h, "counting wrapper"): the evidence that a decode
 * step costs a bounded number of backend calls whatever the batch size
 * (tests/test_layerops.c, generate --stats).  An op the inner backend lacks
 * stays NULL here, so callers see the same optional ops. */
#include "kernels/backend.h"

#include <stdlib.h>

struct count_impl {
    struct backend *inner;
    unsigned long long calls;
};

static struct backend *inner_of(struct backend *be)
{
    struct count_impl *c = be->impl;
    c->calls++;
    return c->inner;
}

static float *count_alloc(struct backend *be, size_t n_floats)
{
    struct backend *inner = inner_of(be);
    return inner->alloc(inner, n_floats);
}

static void count_free(struct backend *be, float *p)
{
    struct backend *inner = inner_of(be);
    inner->free(inner, p);
}

static void count_upload(struct backend *be, float *dst, const float *src_host, size_t n)
{
    struct backend *inner = inner_of(be);
    inner->upload(inner, dst, src_host, n);
}

static void count_download(struct backend *be, float *dst_host, const float *src, size_t n)
{
    struct backend *inner = inner_of(be);
    inner->download(inner, dst_host, src, n);
}

static void count_copy(struct backend *be, float *dst, const float *src, size_t n)
{
    struct backend *inner = inner_of(be);
    inner->copy(inner, dst, src, n);
}

static void count_fill(struct backend *be, float *dst, float value, size_t n)
{
    struct backend *inner = inner_of(be);
    inner->fill(inner, dst, value, n);
}

static void count_gemm(struct backend *be, float *y, const float *x, const float *w,
                       const float *bias, int m, int n, int k)
{
    struct backend *inner = inner_of(be);
    inner->gemm(inner, y, x, w, bias, m, n, k);
}

static void count_rmsnorm(struct backend *be, float *y, const float *x, const float *w, int rows,
                          int dim, float eps)
{
    struct backend *inner = inner_of(be);
    inner->rmsnorm(inner, y, x, w, rows, dim, eps);
}

static void count_rope(struct backend *be, float *x, int rows, int n_heads, int head_dim,
                       const int *pos, const float *inv_freq, enum rope_pairing pairing)
{
    struct backend *inner = inner_of(be);
    inner->rope(inner, x, rows, n_heads, head_dim, pos, inv_freq, pairing);
}

static void count_swiglu(struct backend *be, float *y, const float *gate, const float *up, size_t n)
{
    struct backend *inner = inner_of(be);
    inner->swiglu(inner, y, gate, up, n);
}

static void count_add(struct backend *be, float *y, const float *x, size_t n)
{
    struct backend *inner = inner_of(be);
    inner->add(inner, y, x, n);
}

static void count_embed(struct backend *be, float *y, const float *table, const int *ids, int n,
                        int dim)
{
    struct backend *inner = inner_of(be);
    inner->embed(inner, y, table, ids, n, dim);
}

static void count_gather_rows(struct backend *be, float *y, const float *x, const int *rows,
                              int n, int dim)
{
    struct backend *inner = inner_of(be);
    inner->gather_rows(inner, y, x, rows, n, dim);
}

static void count_attention(struct backend *be, const struct attn_args *a)
{
    struct backend *inner = inner_of(be);
    inner->attention(inner, a);
}

static struct weight *count_weight_create(struct backend *be, enum weight_type type, int rows,
                                          int cols, const void *host, int borrow, int as_f32)
{
    struct backend *inner = inner_of(be);
    return inner->weight_create(inner, type, rows, cols, host, borrow, as_f32);
}

static void count_weight_free(struct backend *be, struct weight *w)
{
    struct backend *inner = inner_of(be);
    inner->weight_free(inner, w);
}

/* The clock ops are instrumentation: passed on without counting a call. */
static void count_time_mark(struct backend *be)
{
    struct backend *inner = ((struct count_impl *)be->impl)->inner;
    inner->time_mark(inner);
}

static double count_time_device_s(struct backend *be)
{
    struct backend *inner = ((struct count_impl *)be->impl)->inner;
    return inner->time_device_s(inner);
}

static double count_time_waited_s(const struct backend *be)
{
    const struct backend *inner = ((const struct count_impl *)be->impl)->inner;
    return inner->time_waited_s(inner);
}

/* A fused block counts as one call when the backend ran it; one it did not
 * serve (1: the caller runs the single ops, counted each) did nothing. */
static int count_layer_in(struct backend *be, const struct layer_in_args *a)
{
    struct count_impl *c = be->impl;
    int rc = c->inner->layer_in(c->inner, a);
    if (rc != 1) c->calls++;
    return rc;
}

static int count_layer_out(struct backend *be, const struct layer_out_args *a)
{
    struct count_impl *c = be->impl;
    int rc = c->inner->layer_out(c->inner, a);
    if (rc != 1) c->calls++;
    return rc;
}

/* Instrumentation, as the clock: not a call. */
static void count_thread_syncs(const struct backend *be, unsigned long *jobs,
                               unsigned long *barriers)
{
    const struct backend *inner = ((const struct count_impl *)be->impl)->inner;
    inner->thread_syncs(inner, jobs, barriers);
}

/* Step graphs: graph_end (the launch) counts as a call; graph_begin, the
 * forgetting and the counts are bookkeeping. */
static int count_graph_begin(struct backend *be, const void *owner, unsigned long shape)
{
    struct backend *inner = ((struct count_impl *)be->impl)->inner;
    return inner->graph_begin(inner, owner, shape);
}

static int count_graph_end(struct backend *be, int ok)
{
    struct count_impl *c = be->impl;
    c->calls++;
    return c->inner->graph_end(c->inner, ok);
}

static void count_graph_forget(struct backend *be)
{
    struct backend *inner = ((struct count_impl *)be->impl)->inner;
    inner->graph_forget(inner);
}

static void count_graph_counts(const struct backend *be, unsigned long *captures,
                               unsigned long *replays, unsigned long *discarded)
{
    const struct backend *inner = ((const struct count_impl *)be->impl)->inner;
    inner->graph_counts(inner, captures, replays, discarded);
}

static struct weight *count_weight_join(struct backend *be, struct weight *const *parts, int n)
{
    struct backend *inner = inner_of(be);
    return inner->weight_join(inner, parts, n);
}

static void count_matmul(struct backend *be, float *y, const float *x, const struct weight *w,
                         const float *bias, int m)
{
    struct backend *inner = inner_of(be);
    inner->matmul(inner, y, x, w, bias, m);
}

static void count_embed_weight_dev(struct backend *be, float *y, const struct weight *w,
                                   const int *ids_dev, int n)
{
    struct backend *inner = inner_of(be);
    inner->embed_weight_dev(inner, y, w, ids_dev, n);
}

static void count_embed_weight(struct backend *be, float *y, const struct weight *w,
                               const int *ids, int n)
{
    struct backend *inner = inner_of(be);
    inner->embed_weight(inner, y, w, ids, n);
}

static int count_window_scores(struct backend *be, const struct window_score_args *a)
{
    struct backend *inner = inner_of(be);
    return inner->window_scores(inner, a);
}

static int count_pool1d(struct backend *be, float *out, const float *in, int n, int kernel,
                        enum score_pool mode)
{
    struct backend *inner = inner_of(be);
    return inner->pool1d(inner, out, in, n, kernel, mode);
}

static int count_key_redundancy(struct backend *be, const struct redundancy_args *a)
{
    struct backend *inner = inner_of(be);
    return inner->key_redundancy(inner, a);
}

static int count_row_range(struct backend *be, float *out, const float *x, int n, int dim)
{
    struct backend *inner = inner_of(be);
    return inner->row_range(inner, out, x, n, dim);
}

static int count_sample(struct backend *be, int *tokens, const float *logits, int n_rows,
                        int n_vocab, const struct sample_row *rows)
{
    struct backend *inner = inner_of(be);
    return inner->sample(inner, tokens, logits, n_rows, n_vocab, rows);
}

static void count_kv_store(struct backend *be, void *dst, enum kv_type type, const float *src,
                           const int *rows, int n, int dim)
{
    struct backend *inner = inner_of(be);
    inner->kv_store(inner, dst, type, src, rows, n, dim);
}

static void count_kv_load(struct backend *be, float *dst, const void *src, enum kv_type type,
                          size_t n)
{
    struct backend *inner = inner_of(be);
    inner->kv_load(inner, dst, src, type, n);
}

static struct kv_table *count_kv_table_create(struct backend *be, int max_seqs, int n_layer,
                                              int n_kv, int n_head, int head_dim)
{
    struct backend *inner = inner_of(be);
    return inner->kv_table_create(inner, max_seqs, n_layer, n_kv, n_head, head_dim);
}

static void count_kv_table_free(struct backend *be, struct kv_table *t)
{
    struct backend *inner = inner_of(be);
    inner->kv_table_free(inner, t);
}

static int count_kv_table_bind(struct backend *be, struct kv_table *t, int slot,
                               const struct kv_seq_desc *d)
{
    struct backend *inner = inner_of(be);
    return inner->kv_table_bind(inner, t, slot, d);
}

static int count_kv_table_step(struct backend *be, struct kv_table *t, int n_seq,
                               const struct kv_step_seq *seqs)
{
    struct backend *inner = inner_of(be);
    return inner->kv_table_step(inner, t, n_seq, seqs);
}

static int count_kv_append(struct backend *be, struct kv_table *t, int layer, const float *k,
                           const float *v, const float *q)
{
    struct backend *inner = inner_of(be);
    return inner->kv_append(inner, t, layer, k, v, q);
}

static int count_attention_layer(struct backend *be, struct kv_table *t,
                                 const struct attn_layer_args *a)
{
    struct backend *inner = inner_of(be);
    return inner->attention_layer(inner, t, a);
}

static int count_window_scores_batch(struct backend *be, const struct score_batch_args *a)
{
    struct backend *inner = inner_of(be);
    return inner->window_scores_batch(inner, a);
}

static int count_key_redundancy_batch(struct backend *be, const struct score_batch_args *a)
{
    struct backend *inner = inner_of(be);
    return inner->key_redundancy_batch(inner, a);
}

static int count_head_mean_batch(struct backend *be, const struct score_batch_args *a)
{
    struct backend *inner = inner_of(be);
    return inner->head_mean_batch(inner, a);
}

static int count_last_query_attn_batch(struct backend *be, const struct score_batch_args *a)
{
    struct backend *inner = inner_of(be);
    return inner->last_query_attn_batch(inner, a);
}

static int count_batch_topk(struct backend *be, const struct score_batch_args *a)
{
    struct backend *inner = inner_of(be);
    return inner->batch_topk(inner, a);
}

static int count_kv_gather_batch(struct backend *be, const struct gather_unit *units,
                                 int n_units, float *scratch, size_t unit_floats)
{
    struct backend *inner = inner_of(be);
    return inner->kv_gather_batch(inner, units, n_units, scratch, unit_floats);
}

static void count_sync(struct backend *be)
{
    struct backend *inner = inner_of(be);
    inner->sync(inner);
}

static void count_destroy(struct backend *be)
{
    if (!be) return;
    struct count_impl *c = be->impl;
    if (c && c->inner) c->inner->destroy(c->inner);
    free(c);
    free(be);
}

struct backend *backend_count_create(struct backend *inner)
{
    if (!inner) return NULL;
    struct backend *be = calloc(1, sizeof *be);
    struct count_impl *c = calloc(1, sizeof *c);
    if (!be || !c) {
        free(be);
        free(c);
        return NULL;
    }
    c->inner = inner;
    /* The inner backend's name: callers that ask which device runs keep their answer. */
    be->name = inner->name;
    be->impl = c;
    be->destroy = count_destroy;
    if (inner->alloc) be->alloc = count_alloc;
    if (inner->free) be->free = count_free;
    if (inner->upload) be->upload = count_upload;
    if (inner->download) be->download = count_download;
    if (inner->copy) be->copy = count_copy;
    if (inner->fill) be->fill = count_fill;
    if (inner->gemm) be->gemm = count_gemm;
    if (inner->rmsnorm) be->rmsnorm = count_rmsnorm;
    if (inner->rope) be->rope = count_rope;
    if (inner->swiglu) be->swiglu = count_swiglu;
    if (inner->add) be->add = count_add;
    if (inner->embed) be->embed = count_embed;
    if (inner->gather_rows) be->gather_rows = count_gather_rows;
    if (inner->attention) be->attention = count_attention;
    if (inner->weight_create) be->weight_create = count_weight_create;
    if (inner->weight_free) be->weight_free = count_weight_free;
    if (inner->weight_join) be->weight_join = count_weight_join;
    if (inner->layer_in) be->layer_in = count_layer_in;
    if (inner->layer_out) be->layer_out = count_layer_out;
    if (inner->thread_syncs) be->thread_syncs = count_thread_syncs;
    be->prefers_joined = inner->prefers_joined;
    be->batch_pads = inner->batch_pads;
    if (inner->time_mark && inner->time_device_s && inner->time_waited_s) {
        be->time_mark = count_time_mark;
        be->time_device_s = count_time_device_s;
        be->time_waited_s = count_time_waited_s;
    }
    if (inner->graph_begin && inner->graph_end && inner->graph_forget && inner->graph_counts) {
        be->graph_begin = count_graph_begin;
        be->graph_end = count_graph_end;
        be->graph_forget = count_graph_forget;
        be->graph_counts = count_graph_counts;
    }
    if (inner->matmul) be->matmul = count_matmul;
    if (inner->embed_weight) be->embed_weight = count_embed_weight;
    if (inner->embed_weight_dev) be->embed_weight_dev = count_embed_weight_dev;
    if (inner->window_scores) be->window_scores = count_window_scores;
    if (inner->pool1d) be->pool1d = count_pool1d;
    if (inner->key_redundancy) be->key_redundancy = count_key_redundancy;
    if (inner->row_range) be->row_range = count_row_range;
    if (inner->sample) be->sample = count_sample;
    if (inner->kv_store) be->kv_store = count_kv_store;
    if (inner->kv_load) be->kv_load = count_kv_load;
    if (inner->kv_table_create) be->kv_table_create = count_kv_table_create;
    if (inner->kv_table_free) be->kv_table_free = count_kv_table_free;
    if (inner->kv_table_bind) be->kv_table_bind = count_kv_table_bind;
    if (inner->kv_table_step) be->kv_table_step = count_kv_table_step;
    if (inner->kv_append) be->kv_append = count_kv_append;
    if (inner->attention_layer) be->attention_layer = count_attention_layer;
    if (inner->window_scores_batch) be->window_scores_batch = count_window_scores_batch;
    if (inner->key_redundancy_batch) be->key_redundancy_batch = count_key_redundancy_batch;
    if (inner->head_mean_batch) be->head_mean_batch = count_head_mean_batch;
    if (inner->last_query_attn_batch) be->last_query_attn_batch = count_last_query_attn_batch;
    if (inner->batch_topk) be->batch_topk = count_batch_topk;
    if (inner->kv_gather_batch) be->kv_gather_batch = count_kv_gather_batch;
    if (inner->sync) be->sync = count_sync;
    return be;
}

unsigned long long backend_count_calls(const struct backend *be)
{
    if (!be || be->destroy != count_destroy) return 0;
    const struct count_impl *c = be->impl;
    return c->calls;
}
