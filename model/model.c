/* model.c - load a model file's weights onto a backend: matrices as typed
 * weights (the file's type, or f32 in exact mode), vectors as f32. */
#include "model.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"

void model_rope_inv_freq(const struct model_config *cfg, const float *rope_freqs, float *out)
{
    int d = cfg->head_dim;
    /* As transformers computes it: base^(arange(0, d, 2)/d) in f32, then 1/x. */
    for (int i = 0; i < d / 2; i++)
        out[i] = 1.0f / powf((float)cfg->rope_theta, (float)(2 * i) / (float)d);

    const float pi = 3.14159265358979323846f;
    if (cfg->rope_scaling.type == ROPE_SCALING_LLAMA3) {
        float factor = cfg->rope_scaling.factor, low = cfg->rope_scaling.low_freq_factor;
        float high = cfg->rope_scaling.high_freq_factor, orig = (float)cfg->rope_scaling.original_ctx;
        float low_wavelen = orig / low, high_wavelen = orig / high;
        for (int i = 0; i < d / 2; i++) {
            float wavelen = 2.0f * pi / out[i];
            if (wavelen < high_wavelen) continue;
            if (wavelen > low_wavelen) {
                out[i] = out[i] / factor;
            } else {
                float s = (orig / wavelen - low) / (high - low);
                out[i] = (1.0f - s) * out[i] / factor + s * out[i];
            }
        }
    } else if (cfg->rope_scaling.type == ROPE_SCALING_LINEAR && cfg->rope_scaling.factor > 0) {
        for (int i = 0; i < d / 2; i++) out[i] /= cfg->rope_scaling.factor;
    }
    if (rope_freqs)
        for (int i = 0; i < d / 2; i++) out[i] /= rope_freqs[i];
}

/* Dequantize one tensor to a host f32 buffer after checking its shape.
 * ne1 = 0 means a vector of ne0 elements. */
static float *load_host(const struct model_file *mf, const char *name, int64_t ne0, int64_t ne1,
                        struct eb_err *e)
{
    const struct tensor_ref *t = model_file_tensor(mf, name);
    if (!t) {
        eb_fail(e, "%s: tensor %s is missing", model_file_path(mf), name);
        return NULL;
    }
    int64_t want1 = ne1 ? ne1 : 1;
    if (t->ne[0] != ne0 || t->ne[1] * t->ne[2] * t->ne[3] != want1) {
        eb_fail(e, "%s: tensor %s has shape [%lld, %lld], expected [%lld, %lld]",
                model_file_path(mf), name, (long long)t->ne[0],
                (long long)(t->ne[1] * t->ne[2] * t->ne[3]), (long long)ne0, (long long)want1);
        return NULL;
    }
    if (!quant_type_supported(t->type)) {
        eb_fail(e, "%s: tensor %s has unsupported type %s", model_file_path(mf), name,
                quant_type_name(t->type));
        return NULL;
    }
    int64_t n = ne0 * want1;
    float *h = eb_malloc((size_t)n * sizeof *h, e);
    if (!h) return NULL;
    if (quant_dequantize(t->type, t->data, h, n) != 0) {
        free(h);
        eb_fail(e, "%s: cannot dequantize tensor %s (%s)", model_file_path(mf), name,
                quant_type_name(t->type));
        return NULL;
    }
    return h;
}

static float *load(struct model *m, const struct model_file *mf, const char *name, int64_t ne0,
                   int64_t ne1, struct eb_err *e)
{
    float *h = load_host(mf, name, ne0, ne1, e);
    if (!h) return NULL;
    size_t n = (size_t)ne0 * (size_t)(ne1 ? ne1 : 1);
    float *d = m->be->alloc(m->be, n);
    if (!d) {
        free(h);
        eb_fail_nomem(e, "%s: out of memory loading %s (%zu bytes)", model_file_path(mf), name,
                n * sizeof(float));
        return NULL;
    }
    m->be->upload(m->be, d, h, n);
    free(h);
    m->weight_bytes += n * sizeof(float);
    return d;
}

const char *model_weights_name(enum model_weights w)
{
    return w == MODEL_WEIGHTS_F32 ? "f32" : "native";
}

int model_weights_parse(const char *s, enum model_weights *out)
{
    if (strcmp(s, "native") == 0) *out = MODEL_WEIGHTS_NATIVE;
    else if (strcmp(s, "f32") == 0) *out = MODEL_WEIGHTS_F32;
    else return -1;
    return 0;
}

/* Matrices (2-D tensors) become typed weights; vectors are f32. */
static int is_matrix(const struct tensor_ref *t)
{
    return t->ne[1] > 1 && strcmp(t->name, "rope_freqs.weight") != 0;
}

/* A matrix stays in its type when asked and a kernel exists for it. */
static int held_native(const struct tensor_ref *t, enum model_weights w)
{
    return w == MODEL_WEIGHTS_NATIVE && t->type != WEIGHT_F32 && quant_type_supported(t->type);
}

size_t model_weight_bytes_opts(const struct model_file *mf, const struct model_load_opts *opts)
{
    enum model_weights w = opts ? opts->weights : MODEL_WEIGHTS_F32;
    size_t total = 0;
    for (int i = 0; i < model_file_tensor_count(mf); i++) {
        const struct tensor_ref *t = model_file_tensor_at(mf, i);
        if (strcmp(t->name, "rope_freqs.weight") == 0) continue;
        if (is_matrix(t) && held_native(t, w)) total += t->nbytes;
        else total += (size_t)tensor_nelements(t) * sizeof(float);
    }
    return total;
}

size_t model_weight_bytes_held(const struct model_file *mf, const struct model_load_opts *opts,
                               size_t (*matrix_bytes)(int type, size_t n_elements, int exact))
{
    int exact = !opts || opts->weights == MODEL_WEIGHTS_F32;
    size_t total = 0;
    for (int i = 0; i < model_file_tensor_count(mf); i++) {
        const struct tensor_ref *t = model_file_tensor_at(mf, i);
        if (strcmp(t->name, "rope_freqs.weight") == 0) continue;
        size_t n = (size_t)tensor_nelements(t);
        total += is_matrix(t) ? matrix_bytes(t->type, n, exact) : n * sizeof(float);
    }
    return total;
}

size_t model_weight_bytes(const struct model_file *mf)
{
    return model_weight_bytes_opts(mf, NULL);
}

/* A matrix [ne1][ne0] as a typed weight; the bytes are borrowed from the
 * file's mapping (the model retains the file when a backend keeps them). */
static struct weight *load_weight(struct model *m, const struct model_file *mf, const char *name,
                                  int64_t ne0, int64_t ne1, int *borrowed, struct eb_err *e)
{
    const char *path = model_file_path(mf);
    const struct tensor_ref *t = model_file_tensor(mf, name);
    if (!t) {
        eb_fail(e, "%s: tensor %s is missing", path, name);
        return NULL;
    }
    if (t->ne[0] != ne0 || t->ne[1] * t->ne[2] * t->ne[3] != ne1) {
        eb_fail(e, "%s: tensor %s has shape [%lld, %lld], expected [%lld, %lld]", path, name,
                (long long)t->ne[0], (long long)(t->ne[1] * t->ne[2] * t->ne[3]),
                (long long)ne0, (long long)ne1);
        return NULL;
    }
    if (!quant_type_supported(t->type)) {
        eb_fail(e, "%s: tensor %s has type %s, which has no kernel or dequantizer", path, name,
                quant_type_name(t->type));
        return NULL;
    }
    size_t row_bytes = quant_row_bytes(t->type, ne0);
    if (row_bytes == 0) {
        eb_fail(e, "%s: tensor %s (%s): rows of %lld values are not whole blocks of %d", path,
                name, quant_type_name(t->type), (long long)ne0, quant_block_elems(t->type));
        return NULL;
    }
    if (ne1 > INT32_MAX || ne0 > INT32_MAX || t->nbytes != row_bytes * (size_t)ne1 || !t->data) {
        eb_fail(e, "%s: tensor %s (%s): %zu bytes, expected %zu (truncated or misaligned blocks)",
                path, name, quant_type_name(t->type), t->nbytes, row_bytes * (size_t)ne1);
        return NULL;
    }
    struct weight *w = m->be->weight_create(m->be, (enum weight_type)t->type, (int)ne1, (int)ne0,
                                            t->data, 1, m->weights == MODEL_WEIGHTS_F32);
    if (!w) {
        eb_fail_nomem(e, "%s: out of memory loading %s (%s, %zu bytes)", path, name,
                      quant_type_name(t->type), t->nbytes);
        return NULL;
    }
    if (w->data == t->data)
        *borrowed = 1;
    else /* copied (dequantized, repacked): the file's pages are not needed twice */
        model_file_drop_pages(mf, t->data, t->nbytes);
    m->weight_bytes += w->bytes ? w->bytes : (size_t)w->rows * w->row_bytes;
    return w;
}

struct type_bytes {
    size_t bytes[QUANT_TYPE_COUNT];
};

static void add_type_bytes(void *ctx, const char *name, const struct weight *w)
{
    (void)name;
    struct type_bytes *tb = ctx;
    if ((int)w->held >= 0 && (int)w->held < QUANT_TYPE_COUNT)
        tb->bytes[w->held] += (size_t)w->rows * w->row_bytes;
}

void model_weight_types(const struct model *m, char *out, size_t out_len)
{
    struct type_bytes tb = {{0}};
    model_each_weight(m, add_type_bytes, &tb);
    size_t used = 0;
    out[0] = '\0';
    for (;;) {
        int best = -1;
        for (int t = 0; t < QUANT_TYPE_COUNT; t++)
            if (tb.bytes[t] && (best < 0 || tb.bytes[t] > tb.bytes[best])) best = t;
        if (best < 0) break;
        int n = snprintf(out + used, out_len - used, "%s%s", used ? "+" : "", quant_type_name(best));
        if (n < 0 || (size_t)n >= out_len - used) break;
        used += (size_t)n;
        tb.bytes[best] = 0;
    }
}

static void free_weight(struct model *m, float *p)
{
    if (p) m->be->free(m->be, p);
}

static void free_matrix(struct model *m, struct weight *w)
{
    if (w) m->be->weight_free(m->be, w);
}

void model_each_weight(const struct model *m,
                       void (*fn)(void *ctx, const char *name, const struct weight *w), void *ctx)
{
    fn(ctx, "token_embd.weight", m->tok_embd);
    if (m->output != m->tok_embd) fn(ctx, "output.weight", m->output);
    static const char *const names[] = {"attn_q", "attn_k", "attn_v", "attn_output",
                                        "ffn_gate", "ffn_up", "ffn_down"};
    char name[96];
    for (int l = 0; l < m->cfg.n_layer; l++) {
        const struct model_layer_weights *w = &m->layers[l];
        const struct weight *all[] = {w->wq, w->wk, w->wv, w->wo, w->w_gate, w->w_up, w->w_down};
        for (int i = 0; i < 7; i++) {
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, names[i]);
            fn(ctx, name, all[i]);
        }
    }
}

void model_free(struct model *m)
{
    if (!m) return;
    if (m->layers) {
        for (int l = 0; l < m->cfg.n_layer; l++) {
            struct model_layer_weights *w = &m->layers[l];
            float *vecs[] = {w->attn_norm, w->bqkv, w->q_norm, w->k_norm, w->ffn_norm};
            for (size_t i = 0; i < sizeof vecs / sizeof vecs[0]; i++) free_weight(m, vecs[i]);
            /* views before the weights they view */
            struct weight *mats[] = {w->wq, w->wk, w->wv, w->wo, w->w_gate, w->w_up, w->w_down,
                                     w->wqkv, w->w_gate_up};
            for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) free_matrix(m, mats[i]);
        }
        free(m->layers);
    }
    if (m->output != m->tok_embd) free_matrix(m, m->output);
    free_matrix(m, m->tok_embd);
    free_weight(m, m->output_norm);
    free_weight(m, m->inv_freq_dev);
    free(m->inv_freq);
    model_file_close(m->file);
    free(m);
}

static int check_config(const struct model_config *c, const char *path, struct eb_err *e)
{
    if (c->n_layer < 1 || c->n_embd < 1 || c->n_ff < 1 || c->n_head < 1 || c->n_head_kv < 1 ||
        c->head_dim < 2 || c->n_vocab < 1)
        return eb_fail(e, "%s: bad model dimensions", path);
    if (c->n_head % c->n_head_kv != 0)
        return eb_fail(e, "%s: %d heads is not a multiple of %d kv heads", path, c->n_head,
                       c->n_head_kv);
    if (c->head_dim % 2 != 0) return eb_fail(e, "%s: head_dim %d is odd", path, c->head_dim);
    if (c->rope_dims != 0 && c->rope_dims != c->head_dim)
        return eb_fail(e, "%s: partial rotary embeddings (%d of %d dims) are not supported", path,
                       c->rope_dims, c->head_dim);
    if (!(c->rope_theta > 0)) return eb_fail(e, "%s: rope theta must be > 0", path);
    return 0;
}

/* q, k and v biases in one buffer (bqkv), so a joined product adds them in
 * one pass; bq, bk and bv point into it. */
static int load_qkv_bias(struct model *m, const struct model_file *mf, int l,
                         struct model_layer_weights *w, struct eb_err *e)
{
    const struct model_config *c = &m->cfg;
    int widths[3] = {c->n_head * c->head_dim, c->n_head_kv * c->head_dim,
                     c->n_head_kv * c->head_dim};
    static const char *const names[3] = {"attn_q.bias", "attn_k.bias", "attn_v.bias"};
    size_t total = (size_t)widths[0] + 2 * (size_t)widths[1];
    if (!(w->bqkv = m->be->alloc(m->be, total)))
        return eb_fail_nomem(e, "%s: out of memory loading layer %d's biases",
                             model_file_path(mf), l);
    float **parts[3] = {&w->bq, &w->bk, &w->bv};
    size_t off = 0;
    char name[96];
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "blk.%d.%s", l, names[i]);
        float *h = load_host(mf, name, widths[i], 0, e);
        if (!h) return -1;
        m->be->upload(m->be, w->bqkv + off, h, (size_t)widths[i]);
        free(h);
        *parts[i] = w->bqkv + off;
        off += (size_t)widths[i];
    }
    m->weight_bytes += total * sizeof(float);
    return 0;
}

/* The projections of one activation as one weight where the backend can
 * hold them so (weight_join): one product instead of three (q, k, v) or two
 * (gate, up).  Where it cannot, they stay apart: nothing is lost.  (The CPU
 * gains nothing, its fused blocks already take q/k/v in one job, and a join
 * costs a transient copy at load, so by default only a GPU joins.) */
static void join_projections(struct model *m, struct model_layer_weights *w)
{
    struct backend *be = m->be;
    if (!be->weight_join) return;
    struct weight *qkv[3] = {w->wq, w->wk, w->wv}, *gu[2] = {w->w_gate, w->w_up};
    w->wqkv = be->weight_join(be, qkv, 3);
    w->w_gate_up = be->weight_join(be, gu, 2);
}

int model_load(const struct model_file *mf, struct backend *be, struct model **out,
               struct eb_err *e)
{
    return model_load_opts(mf, be, NULL, out, e);
}

int model_load_opts(const struct model_file *mf, struct backend *be,
                    const struct model_load_opts *opts, struct model **out, struct eb_err *e)
{
    *out = NULL;
    const struct model_config *c = model_file_config(mf);
    const char *path = model_file_path(mf);
    if (check_config(c, path, e)) return -1;
    struct model *m = eb_calloc(1, sizeof *m, e);
    if (!m) return -1;
    m->cfg = *c;
    m->be = be;
    m->weights = opts ? opts->weights : MODEL_WEIGHTS_F32;
    int borrowed = 0;
    m->pairing = c->qk_permuted ? ROPE_PAIR_ADJACENT : ROPE_PAIR_HALF;
    int d = c->n_embd, hd = c->head_dim, qd = c->n_head * hd, kvd = c->n_head_kv * hd;
    char name[96];

    m->inv_freq = eb_malloc((size_t)(hd / 2) * sizeof *m->inv_freq, e);
    if (!m->inv_freq) goto fail;
    float *rope_freqs = NULL;
    if (model_file_tensor(mf, "rope_freqs.weight")) {
        rope_freqs = load_host(mf, "rope_freqs.weight", hd / 2, 0, e);
        if (!rope_freqs) goto fail;
    }
    model_rope_inv_freq(c, rope_freqs, m->inv_freq);
    free(rope_freqs);
    /* A step then reads the frequencies where the backend computes. */
    if (!(m->inv_freq_dev = be->alloc(be, (size_t)(hd / 2)))) {
        eb_fail_nomem(e, "%s: out of memory for the rope frequencies", path);
        goto fail;
    }
    /* (not counted in weight_bytes, which is the file's weights as held) */
    be->upload(be, m->inv_freq_dev, m->inv_freq, (size_t)(hd / 2));

    if (!(m->tok_embd = load_weight(m, mf, "token_embd.weight", d, c->n_vocab, &borrowed, e)))
        goto fail;
    if (!(m->output_norm = load(m, mf, "output_norm.weight", d, 0, e))) goto fail;
    if (c->tied_embeddings || !model_file_tensor(mf, "output.weight")) {
        m->output = m->tok_embd;
    } else if (!(m->output = load_weight(m, mf, "output.weight", d, c->n_vocab, &borrowed, e))) {
        goto fail;
    }

    m->layers = eb_calloc((size_t)c->n_layer, sizeof *m->layers, e);
    if (!m->layers) goto fail;
    for (int l = 0; l < c->n_layer; l++) {
        struct model_layer_weights *w = &m->layers[l];
#define LOAD(field, suffix, ne0, ne1)                                        \
        do {                                                                 \
            snprintf(name, sizeof name, "blk.%d.%s", l, suffix);             \
            if (!(w->field = load(m, mf, name, ne0, ne1, e))) goto fail;     \
        } while (0)
#define MATRIX(field, suffix, ne0, ne1)                                      \
        do {                                                                 \
            snprintf(name, sizeof name, "blk.%d.%s", l, suffix);             \
            if (!(w->field = load_weight(m, mf, name, ne0, ne1, &borrowed, e))) goto fail; \
        } while (0)
        LOAD(attn_norm, "attn_norm.weight", d, 0);
        MATRIX(wq, "attn_q.weight", d, qd);
        MATRIX(wk, "attn_k.weight", d, kvd);
        MATRIX(wv, "attn_v.weight", d, kvd);
        MATRIX(wo, "attn_output.weight", qd, d);
        if (c->has_qkv_bias && load_qkv_bias(m, mf, l, w, e)) goto fail;
        if (c->has_qk_norm) {
            LOAD(q_norm, "attn_q_norm.weight", hd, 0);
            LOAD(k_norm, "attn_k_norm.weight", hd, 0);
        }
        LOAD(ffn_norm, "ffn_norm.weight", d, 0);
        MATRIX(w_gate, "ffn_gate.weight", d, c->n_ff);
        MATRIX(w_up, "ffn_up.weight", d, c->n_ff);
        MATRIX(w_down, "ffn_down.weight", c->n_ff, d);
#undef LOAD
#undef MATRIX
        enum model_join join = opts ? opts->join : MODEL_JOIN_AUTO;
        if (join == MODEL_JOIN_ALWAYS || (join == MODEL_JOIN_AUTO && be->prefers_joined))
            join_projections(m, w);
    }
    if (borrowed) m->file = model_file_retain(mf);
    *out = m;
    return 0;
fail:
    model_free(m);
    return -1;
}

int model_kvcache_create(const struct model *m, int capacity, struct kvcache **out,
                         struct eb_err *e)
{
    return model_kvcache_create_as(m, capacity, KV_F32, out, e);
}

int model_kvcache_create_as(const struct model *m, int capacity, enum kv_type type,
                            struct kvcache **out, struct eb_err *e)
{
    return kvcache_create(m->be, m->cfg.n_layer, m->cfg.n_head_kv, m->cfg.head_dim, capacity,
                          type, out, e);
}
