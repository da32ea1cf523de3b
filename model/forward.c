/* forward.c - one forward pass over a ragged batch of sequences.
 *
 * The new tokens of all sequences are stacked into one activation [T][n_embd],
 * so every projection is a single GEMM over T rows, and the KV append and
 * attention are one backend call per layer for the whole batch, through the
 * backend's KV table (kernels/backend.h): a bounded number of backend calls
 * per layer whatever the batch size and head count.  Per layer:
 *   xb = rmsnorm(x); q,k,v = xb W (+b); [qwen3: per-head rmsnorm of q, k];
 *   rope(q, k); append k, v (and q to the query rings) to every cache;
 *   att = attention(q, caches);
 *   x += att Wo;  x += down(silu(gate(rmsnorm(x))) * up(rmsnorm(x)))
 * then the final norm and the LM head on the rows that want logits only.
 * Table slot s holds the batch's sequence s; a slot is rebound only when its
 * cache changed behind the table's back (kvcache.gen): a new sequence, a
 * compaction. */
#include "model.h"
#include "kernels/step_graph.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct forward {
    const struct model *m;
    int max_tokens, max_logit_rows;
    /* backend scratch */
    float *x, *xb, *q, *k, *v, *att, *hb, *hb2, *logits_dev;
    int *step_dev;           /* the step's ids, then its positions ([2][max_tokens] int32),
                                in backend memory: one upload a step */
    int *pos_dev;            /* step_dev + max_tokens */
    int fused_in, fused_out; /* layers of the last forward the backend ran fused */
    float *qkv_scratch;      /* hb when a joined q/k/v product fits it (layer_in_args.qkv_out),
                                else NULL */
    float *probs;            /* grown on demand when attention probabilities are requested */
    size_t probs_cap;
    /* host */
    float *logits;
    int logits_stay;         /* forward_logits_stay */
    int *pos, *ids, *rows;
    /* the backend's KV table: slot s holds bound[s] as of its generation bound_gen[s] */
    struct kv_table *tab;
    const struct kvcache **bound;
    uint64_t *bound_gen;
    struct kv_step_seq *step;
    /* step graphs (backend.graph_begin): the last step's shape, and its id */
    int prev_n_seq, *prev_new, *prev_pad;
    int rebound;             /* a slot was bound during this step */
    unsigned long shape_id;
};

size_t forward_device_bytes(const struct model_config *c, int max_tokens, int max_logit_rows)
{
    size_t t = (size_t)max_tokens;
    size_t qd = (size_t)c->n_head * c->head_dim, kvd = (size_t)c->n_head_kv * c->head_dim;
    return 2 * backend_alloc_bytes(t * c->n_embd) + 2 * backend_alloc_bytes(t * qd) +
           2 * backend_alloc_bytes(t * kvd) + backend_alloc_bytes(2 * t * c->n_ff) +
           backend_alloc_bytes((size_t)max_logit_rows * c->n_vocab) + backend_alloc_bytes(2 * t);
}

size_t forward_alloc_bytes(const struct model_config *c, int max_tokens, int max_logit_rows)
{
    size_t t = (size_t)max_tokens;
    size_t host = (size_t)max_logit_rows * c->n_vocab * sizeof(float) + 3 * t * sizeof(int);
    return forward_device_bytes(c, max_tokens, max_logit_rows) + host;
}

size_t forward_probs_bytes(const struct model_config *c, int rows, int max_cap)
{
    if (rows < 1 || max_cap < 1) return 0;
    return backend_alloc_bytes((size_t)c->n_head * rows * max_cap);
}

void forward_free(struct forward *f)
{
    if (!f) return;
    struct backend *be = f->m->be;
    float *bufs[] = {f->x, f->xb, f->q, f->k, f->v, f->att, f->hb, f->logits_dev, f->probs,
                     (float *)f->step_dev}; /* hb2 is part of hb, pos_dev of step_dev */
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) be->free(be, bufs[i]);
    if (f->tab) be->kv_table_free(be, f->tab);
    if (be->graph_forget) be->graph_forget(be); /* a recording reads these buffers */
    free(f->bound);
    free(f->bound_gen);
    free(f->step);
    free(f->prev_new);
    free(f->logits);
    free(f->ids);
    free(f->rows);
    free(f);
}

int forward_create(const struct model *m, int max_tokens, int max_logit_rows,
                   struct forward **out, struct eb_err *e)
{
    *out = NULL;
    if (max_tokens < 1 || max_logit_rows < 1)
        return eb_fail(e, "forward: batch limits must be >= 1 (tokens %d, logit rows %d)",
                       max_tokens, max_logit_rows);
    struct forward *f = eb_calloc(1, sizeof *f, e);
    if (!f) return -1;
    if (!m->be->kv_table_create || !m->be->kv_table_bind || !m->be->kv_table_step ||
        !m->be->kv_append || !m->be->attention_layer) {
        free(f);
        return eb_fail(e, "forward: the %s backend has no layer-granular KV ops (kv_table, "
                          "kv_append, attention_layer)", m->be->name);
    }
    f->m = m;
    f->max_tokens = max_tokens;
    f->max_logit_rows = max_logit_rows;
    const struct model_config *c = &m->cfg;
    struct backend *be = m->be;
    size_t t = (size_t)max_tokens;
    size_t qd = (size_t)c->n_head * c->head_dim, kvd = (size_t)c->n_head_kv * c->head_dim;
    size_t lr = (size_t)max_logit_rows;
    f->x = be->alloc(be, t * c->n_embd);
    f->xb = be->alloc(be, t * c->n_embd);
    f->q = be->alloc(be, t * qd);
    f->att = be->alloc(be, t * qd);
    f->k = be->alloc(be, t * kvd);
    f->v = be->alloc(be, t * kvd);
    /* gate's and up's products: one buffer, so a joined product fills both */
    f->hb = be->alloc(be, 2 * t * c->n_ff);
    f->hb2 = f->hb ? f->hb + t * c->n_ff : NULL;
    f->logits_dev = be->alloc(be, lr * c->n_vocab);
    /* hb (2 n_ff floats a row) is free until the MLP: the joined product's scratch */
    if ((size_t)(c->n_head + 2 * c->n_head_kv) * c->head_dim <= 2 * (size_t)c->n_ff)
        f->qkv_scratch = f->hb;
    f->step_dev = (int *)be->alloc(be, 2 * t); /* int32, one per float */
    f->pos_dev = f->step_dev ? f->step_dev + t : NULL;
    if (!f->x || !f->xb || !f->q || !f->att || !f->k || !f->v || !f->hb || !f->logits_dev ||
        !f->step_dev) {
        forward_free(f);
        return eb_fail_nomem(e, "forward: out of memory for activations of %d tokens (%zu bytes)",
                       max_tokens, forward_alloc_bytes(c, max_tokens, max_logit_rows));
    }
    f->logits = eb_malloc(lr * c->n_vocab * sizeof *f->logits, e);
    f->ids = eb_calloc(2 * t, sizeof *f->ids, e); /* ids, then positions: step_dev's image */
    f->pos = f->ids ? f->ids + t : NULL;
    f->rows = eb_malloc((t > lr ? t : lr) * sizeof *f->rows, e);
    f->bound = eb_calloc(t, sizeof *f->bound, e);
    f->bound_gen = eb_calloc(t, sizeof *f->bound_gen, e);
    f->step = eb_calloc(t, sizeof *f->step, e);
    f->prev_new = eb_calloc(2 * t, sizeof *f->prev_new, e);
    f->prev_pad = f->prev_new ? f->prev_new + t : NULL;
    if (!f->logits || !f->pos || !f->ids || !f->rows || !f->bound || !f->bound_gen || !f->step ||
        !f->prev_new) {
        forward_free(f);
        return -1;
    }
    /* A batch holds at most one sequence per token. */
    if (!(f->tab = be->kv_table_create(be, max_tokens, c->n_layer, c->n_head_kv, c->n_head,
                                       c->head_dim))) {
        forward_free(f);
        return eb_fail(e, "forward: cannot create a KV table on the %s backend (out of memory?)",
                       be->name);
    }
    *out = f;
    return 0;
}

const float *forward_logits(const struct forward *f)
{
    return f->logits;
}

void forward_logits_stay(struct forward *f, int on)
{
    f->logits_stay = on;
}

const float *forward_logits_dev(const struct forward *f)
{
    return f->logits_dev;
}

const float *forward_logits_row(struct forward *f, int row)
{
    size_t V = (size_t)f->m->cfg.n_vocab;
    f->m->be->download(f->m->be, f->logits + (size_t)row * V, f->logits_dev + (size_t)row * V, V);
    return f->logits + (size_t)row * V;
}

void forward_fused_layers(const struct forward *f, int *in, int *out)
{
    *in = f->fused_in;
    *out = f->fused_out;
}

static int reserve_probs(struct forward *f, size_t n, struct eb_err *e)
{
    if (n <= f->probs_cap) return 0;
    struct backend *be = f->m->be;
    if (f->probs) be->free(be, f->probs);
    f->probs = be->alloc(be, n);
    f->probs_cap = f->probs ? n : 0;
    if (!f->probs) return eb_fail_nomem(e, "forward: out of memory for attention probabilities");
    return 0;
}

/* Lay out the batch (rows, positions, logit rows) and check it fits. */
static int plan_batch(struct forward *f, struct fwd_batch *b, int *n_logit_rows, struct eb_err *e)
{
    int t = 0, r = 0;
    for (int s = 0; s < b->n_seq; s++) {
        struct fwd_seq *q = &b->seqs[s];
        if (q->n_tokens < 1 || !q->tokens || !q->cache)
            return eb_fail(e, "forward: sequence %d has no tokens or no cache", q->id);
        if (q->n_pad < 0 || q->n_pad > q->n_tokens)
            return eb_fail(e, "forward: sequence %d has %d pads among %d tokens", q->id, q->n_pad,
                           q->n_tokens);
        if (q->n_tokens > f->max_tokens - t)
            return eb_fail(e, "forward: batch of more than %d tokens", f->max_tokens);
        if (kvcache_free_slots(q->cache) < q->n_tokens)
            return eb_fail(e, "forward: KV cache of sequence %d is full (%d slots)", q->id,
                           q->cache->capacity);
        q->row0 = t;
        q->logit_row0 = r;
        int want = q->logits == FWD_LOGITS_ALL ? q->n_tokens : q->logits == FWD_LOGITS_LAST ? 1 : 0;
        if (want > f->max_logit_rows - r)
            return eb_fail(e, "forward: more than %d rows of logits requested", f->max_logit_rows);
        for (int i = 0; i < q->n_tokens; i++) {
            int id = q->tokens[i];
            if (id < 0 || id >= f->m->cfg.n_vocab)
                return eb_fail(e, "forward: token id %d out of range [0, %d)", id,
                               f->m->cfg.n_vocab);
            f->ids[t + i] = id;
            f->pos[t + i] = q->cache->next_pos + i;
        }
        for (int i = q->n_tokens - want; i < q->n_tokens; i++) f->rows[r++] = t + i;
        t += q->n_tokens;
    }
    b->n_rows = t;
    *n_logit_rows = r;
    return 0;
}

/* Bind every slot whose cache the table does not hold as it is now (a new
 * sequence, or one compacted or appended to directly); host-only when none. */
static int sync_slots(struct forward *f, const struct fwd_batch *b, struct eb_err *e)
{
    struct backend *be = f->m->be;
    for (int s = 0; s < b->n_seq; s++) {
        const struct kvcache *kc = b->seqs[s].cache;
        if (f->bound[s] == kc && f->bound_gen[s] == kc->gen) continue;
        struct kv_seq_desc d;
        kvcache_describe(kc, &d);
        f->bound[s] = NULL;
        int rc = be->kv_table_bind(be, f->tab, s, &d);
        if (rc == KV_TABLE_NOMEM)
            return eb_fail_nomem(e, "forward: out of memory binding the cache of sequence %d "
                                    "to the %s backend's KV table", b->seqs[s].id, be->name);
        if (rc)
            return eb_fail(e, "forward: the %s backend cannot hold the cache of sequence %d",
                           be->name, b->seqs[s].id);
        f->bound[s] = kc;
        f->bound_gen[s] = kc->gen;
        f->rebound = 1;
    }
    return 0;
}

/* After a failed backend op the table may disagree with the caches: rebind all. */
static int unbind_all(struct forward *f)
{
    for (int s = 0; s < f->max_tokens; s++) f->bound[s] = NULL;
    return -1;
}

/* The step's rows per slot (one small update per forward pass). */
static int start_step(struct forward *f, const struct fwd_batch *b, struct eb_err *e)
{
    struct backend *be = f->m->be;
    for (int s = 0; s < b->n_seq; s++) {
        const struct fwd_seq *q = &b->seqs[s];
        /* Pads are masked only in a cache that declared them (kvcache_pad_mask). */
        f->step[s] = (struct kv_step_seq){s, q->row0, q->n_tokens,
                                          q->cache->left_pad > 0 ? q->n_pad : 0, q->cache->q_next};
    }
    if (be->kv_table_step(be, f->tab, b->n_seq, f->step))
        return eb_fail(e, "forward: the %s backend refused the batch's KV table step", be->name);
    return 0;
}

/* Layer l's KV append (unless attention_input did it) and attention for the
 * whole batch, and the attention probabilities to the hook when asked for. */
static int layer_attention(struct forward *f, struct fwd_batch *b, int l, int appended,
                           const struct model_hooks *hooks, struct eb_err *e)
{
    const struct model_config *c = &f->m->cfg;
    struct backend *be = f->m->be;
    int want_probs = hooks && (hooks->needs & MODEL_NEED_ATTN_PROBS);
    if (!appended && be->kv_append(be, f->tab, l, f->k, f->v, f->q)) {
        unbind_all(f);
        return eb_fail(e, "forward: KV append of layer %d failed on the %s backend", l, be->name);
    }
    size_t probs_n = 0;
    for (int s = 0; s < b->n_seq; s++) {
        const struct fwd_seq *q = &b->seqs[s];
        kvcache_note_append(q->cache, l, q->n_tokens, q->n_pad);
        probs_n += (size_t)c->n_head * q->n_tokens * q->cache->capacity;
    }
    if (want_probs && reserve_probs(f, probs_n, e)) return unbind_all(f);
    struct attn_layer_args a = {l, f->att, f->q, 1.0f / sqrtf((float)c->head_dim),
                                want_probs ? f->probs : NULL};
    if (be->attention_layer(be, f->tab, &a)) {
        unbind_all(f);
        return eb_fail(e, "forward: attention of layer %d failed on the %s backend", l, be->name);
    }
    if (!want_probs || !hooks->attn_probs) return 0;
    size_t off = 0;
    for (int s = 0; s < b->n_seq; s++) {
        const struct fwd_seq *q = &b->seqs[s];
        if (hooks->attn_probs(hooks->ctx, b, s, l, f->probs + off, q->n_tokens,
                              q->cache->capacity, e))
            return -1;
        off += (size_t)c->n_head * q->n_tokens * q->cache->capacity;
    }
    return 0;
}

/* xb = rmsnorm(x); q, k, v = xb W (+b); [qwen3: per-head rmsnorm of q, k];
 * rope(q, k): one fused backend call where the backend serves it, which also
 * appends layer l's K/V rows to the caches (RoPE fused with the append).
 * 1: appended; 0: not (the single ops ran); -1: the append was refused. */
static int attention_input(struct forward *f, const struct model_layer_weights *w, int l, int T)
{
    const struct model *m = f->m;
    const struct model_config *c = &m->cfg;
    struct backend *be = m->be;
    int d = c->n_embd, hd = c->head_dim;
    struct layer_in_args a = {T, d, c->n_head, c->n_head_kv, hd, f->x, w->attn_norm, c->rms_eps,
                              w->wq, w->wk, w->wv, w->bq, w->bk, w->bv, w->q_norm, w->k_norm,
                              f->pos, m->inv_freq, m->pairing, f->xb, f->q, f->k, f->v,
                              w->wqkv, w->wqkv ? w->bqkv : NULL, f->pos_dev, m->inv_freq_dev,
                              f->qkv_scratch, f->tab, l};
    int rc = be->layer_in ? be->layer_in(be, &a) : 1;
    if (rc != 1) {
        f->fused_in++;
        return rc == 0 ? 1 : -1;
    }
    be->rmsnorm(be, f->xb, f->x, w->attn_norm, T, d, c->rms_eps);
    be->matmul(be, f->q, f->xb, w->wq, w->bq, T);
    be->matmul(be, f->k, f->xb, w->wk, w->bk, T);
    be->matmul(be, f->v, f->xb, w->wv, w->bv, T);
    if (w->q_norm) {
        be->rmsnorm(be, f->q, f->q, w->q_norm, T * c->n_head, hd, c->rms_eps);
        be->rmsnorm(be, f->k, f->k, w->k_norm, T * c->n_head_kv, hd, c->rms_eps);
    }
    be->rope(be, f->q, T, c->n_head, hd, f->pos, m->inv_freq, m->pairing);
    be->rope(be, f->k, T, c->n_head_kv, hd, f->pos, m->inv_freq, m->pairing);
    return 0;
}

/* x += att Wo;  x += down(silu(gate(rmsnorm(x))) * up(rmsnorm(x))): one
 * fused backend call where the backend serves it. */
static void layer_output(struct forward *f, const struct model_layer_weights *w, int T)
{
    const struct model_config *c = &f->m->cfg;
    struct backend *be = f->m->be;
    int d = c->n_embd;
    struct layer_out_args a = {T, d, c->n_ff, f->x, f->att, w->wo, w->w_gate, w->w_up, w->w_down,
                               w->ffn_norm, c->rms_eps, f->xb, f->hb, f->hb2, w->w_gate_up};
    if (be->layer_out && be->layer_out(be, &a) == 0) {
        f->fused_out++;
        return;
    }
    be->matmul(be, f->xb, f->att, w->wo, NULL, T);
    be->add(be, f->x, f->xb, (size_t)T * d);
    be->rmsnorm(be, f->xb, f->x, w->ffn_norm, T, d, c->rms_eps);
    be->matmul(be, f->hb, f->xb, w->w_gate, NULL, T);
    be->matmul(be, f->hb2, f->xb, w->w_up, NULL, T);
    be->swiglu(be, f->hb, f->hb, f->hb2, (size_t)T * c->n_ff);
    be->matmul(be, f->xb, f->hb, w->w_down, NULL, T);
    be->add(be, f->x, f->xb, (size_t)T * d);
}

/* The step's shape id for backend.graph_begin (kernels/step_graph.h): a new
 * id when the batch's sequences, their new rows or pads, or a slot's binding
 * changed since the last step; 0 when the step must not be recorded (hooks
 * that run per layer, a layer of the last step ran single ops, ids that
 * would be read from the host). */
static unsigned long step_shape(struct forward *f, const struct fwd_batch *b,
                                const struct model_hooks *hooks)
{
    const struct model *m = f->m;
    int same = !f->rebound && b->n_seq == f->prev_n_seq;
    for (int s = 0; s < b->n_seq; s++) {
        same = same && f->prev_new[s] == f->step[s].n_new && f->prev_pad[s] == f->step[s].n_pad;
        f->prev_new[s] = f->step[s].n_new;
        f->prev_pad[s] = f->step[s].n_pad;
    }
    f->prev_n_seq = b->n_seq;
    f->rebound = 0;
    if (!same) f->shape_id++;
    int per_layer = hooks && (hooks->after_layer || (hooks->needs & MODEL_NEED_ATTN_PROBS));
    int all_fused = f->fused_in == m->cfg.n_layer && f->fused_out == m->cfg.n_layer;
    if (per_layer || !all_fused || !m->be->embed_weight_dev) return 0;
    return f->shape_id;
}

/* The embedding and every layer: what a step graph records. */
static int run_layers(struct forward *f, struct fwd_batch *b, const struct model_hooks *hooks,
                      struct eb_err *e)
{
    const struct model *m = f->m;
    struct backend *be = m->be;
    int T = b->n_rows;
    if (be->embed_weight_dev)
        be->embed_weight_dev(be, f->x, m->tok_embd, f->step_dev, T);
    else
        be->embed_weight(be, f->x, m->tok_embd, f->ids, T);
    for (int l = 0; l < m->cfg.n_layer; l++) {
        const struct model_layer_weights *w = &m->layers[l];
        if (sync_slots(f, b, e)) return unbind_all(f);
        int appended = attention_input(f, w, l, T);
        if (appended < 0) {
            unbind_all(f);
            return eb_fail(e, "forward: KV append of layer %d failed on the %s backend", l,
                           be->name);
        }
        if (layer_attention(f, b, l, appended, hooks, e)) return -1;
        layer_output(f, w, T);
        if (hooks && hooks->after_layer && hooks->after_layer(hooks->ctx, b, l, f->x, e)) return -1;
    }
    return 0;
}

int model_forward(struct forward *f, struct fwd_batch *b, const struct model_hooks *hooks,
                  struct eb_err *e)
{
    const struct model *m = f->m;
    const struct model_config *c = &m->cfg;
    struct backend *be = m->be;
    int n_rows = 0;
    if (b->n_seq < 1) return eb_fail(e, "forward: empty batch");
    if (plan_batch(f, b, &n_rows, e)) return -1;
    int T = b->n_rows, d = c->n_embd;
    unsigned needs = hooks ? hooks->needs : 0;
    if (sync_slots(f, b, e) || start_step(f, b, e)) return unbind_all(f);
    /* (read before fused_in/out restart: whether the last step ran fused) */
    unsigned long shape = be->graph_begin ? step_shape(f, b, hooks) : 0;
    f->fused_in = f->fused_out = 0;
    /* The step's ids and positions in one upload (int32 travel as their
     * bits: upload copies floats' bytes), read from there by the embedding
     * and every layer's RoPE. */
    be->upload(be, (float *)f->step_dev, (const float *)f->ids, (size_t)(f->max_tokens + T));
    int mode = be->graph_begin ? be->graph_begin(be, f, shape) : STEP_EAGER;
    int rc = run_layers(f, b, hooks, e);
    if (mode != STEP_EAGER && be->graph_end(be, rc == 0) && rc == 0)
        rc = eb_fail(e, "forward: the %s backend's step graph failed to run", be->name);
    if (rc) return -1;
    for (int s = 0; s < b->n_seq; s++) {
        kvcache_advance(b->seqs[s].cache, b->seqs[s].n_tokens);
        kvcache_qring_advance(b->seqs[s].cache, b->seqs[s].n_tokens);
    }

    if ((needs & MODEL_NEED_HIDDEN_LAST) && hooks->hidden_last) {
        be->rmsnorm(be, f->xb, f->x, m->output_norm, T, d, c->rms_eps);
        if (hooks->hidden_last(hooks->ctx, b, f->xb, e)) return -1;
    }
    if (n_rows > 0) {
        be->gather_rows(be, f->xb, f->x, f->rows, n_rows, d);
        be->rmsnorm(be, f->xb, f->xb, m->output_norm, n_rows, d, c->rms_eps);
        be->matmul(be, f->logits_dev, f->xb, m->output, NULL, n_rows);
        /* A backend that samples in its own memory sends ids, not logits. */
        if (!f->logits_stay)
            be->download(be, f->logits, f->logits_dev, (size_t)n_rows * c->n_vocab);
    }
    return 0;
}
