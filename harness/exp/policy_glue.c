/* policy_glue.c - wires a policy to generate()'s hooks (see policy_glue.h). */
#include "harness/exp/policy_glue.h"
#include "harness/exp/policy_glue_priv.h"
#include "harness/exp/retention.h"
#include "util/clock.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

struct policy_model policy_model_of(const struct model *m)
{
    return policy_model_of_config(&m->cfg);
}

struct policy_model policy_model_of_config(const struct model_config *cfg)
{
    struct policy_model pm = {.n_layer = cfg->n_layer, .n_head = cfg->n_head,
                              .n_kv = cfg->n_head_kv, .head_dim = cfg->head_dim,
                              .n_embd = cfg->n_embd};
    return pm;
}

void policy_glue_free(struct policy_glue *g)
{
    if (!g) return;
    if (g->qbuf) {
        for (int l = 0; l < g->pm.n_layer; l++)
            if (g->qbuf[l]) g->be->free(g->be, g->qbuf[l]);
        free(g->qbuf);
    }
    free(g->seqs);
    free(g->host);
    free(g->ks.n_keep);
    free(g->ks.idx);
    free(g->mark);
    retention_free(g->rec);
    glue_batch_free(g);
    free(g);
}

static int reserve_host(struct policy_glue *g, size_t n, struct eb_err *e)
{
    if (n <= g->host_cap) return 0;
    float *h = realloc(g->host, n * sizeof *h);
    if (!h) return eb_fail(e, "policy glue: out of memory for %zu floats", n);
    g->host = h;
    g->host_cap = n;
    return 0;
}

static struct glue_seq *glue_seq(struct policy_glue *g, int seq, struct eb_err *e)
{
    if (seq < 0 || seq > (1 << 28)) return eb_fail(e, "policy glue: sequence id %d", seq), NULL;
    if (seq >= g->seqs_cap) {
        int cap = g->seqs_cap ? g->seqs_cap : 16;
        while (cap <= seq) cap *= 2;
        struct glue_seq *s = realloc(g->seqs, (size_t)cap * sizeof *s);
        if (!s) return eb_fail(e, "policy glue: out of memory"), NULL;
        memset(s + g->seqs_cap, 0, (size_t)(cap - g->seqs_cap) * sizeof *s);
        g->seqs = s;
        g->seqs_cap = cap;
    }
    return &g->seqs[seq];
}

static int reserve_keep(struct policy_glue *g, int stride, struct eb_err *e)
{
    if (stride <= g->ks.stride) return 0;
    size_t heads = (size_t)g->pm.n_layer * g->pm.n_kv;
    free(g->ks.idx);
    free(g->mark);
    g->ks.idx = malloc(heads * (size_t)stride * sizeof *g->ks.idx);
    g->mark = malloc((size_t)stride);
    g->ks.stride = g->ks.idx && g->mark ? stride : 0;
    if (!g->ks.stride) return eb_fail(e, "policy glue: out of memory for keep-sets");
    return 0;
}

/* ---- model hooks ---- */

static int glue_attn_probs(void *ctx, const struct fwd_batch *b, int s, int layer,
                           const float *probs, int n_new, int cap, struct eb_err *e)
{
    struct policy_glue *g = ctx;
    double t0 = clock_now_s();
    const struct fwd_seq *q = &b->seqs[s];
    size_t n = (size_t)g->pm.n_head * n_new * cap;
    if (reserve_host(g, n, e)) return -1;
    g->be->download(g->be, g->host, probs, n);
    struct attn_view av = {layer, g->host, g->pm.n_head, n_new, cap,
                           q->cache->len + (size_t)layer * g->pm.n_kv};
    int rc = g->p->ops->observe_attn(g->p->self, q->id, &av, e);
    g->st.policy_s += clock_now_s() - t0;
    return rc ? eb_wrap(e, g->p->name) : 0;
}

static int glue_hidden_last(void *ctx, const struct fwd_batch *b, const float *hidden,
                            struct eb_err *e)
{
    struct policy_glue *g = ctx;
    double t0 = clock_now_s();
    int dim = g->m->cfg.n_embd, rc = 0;
    for (int s = 0; s < b->n_seq && rc == 0; s++) {
        const struct fwd_seq *q = &b->seqs[s];
        int n_real = q->n_tokens - q->n_pad; /* policies never see pad rows */
        size_t n = (size_t)n_real * dim;
        if (n_real < 1) continue;
        if ((rc = reserve_host(g, n, e))) break;
        g->be->download(g->be, g->host, hidden + ((size_t)q->row0 + q->n_pad) * dim, n);
        if ((rc = g->p->ops->observe_hidden(g->p->self, q->id, g->host, n_real, dim, e)))
            eb_wrap(e, g->p->name);
    }
    g->st.policy_s += clock_now_s() - t0;
    return rc;
}

static int glue_after_layer(void *ctx, const struct fwd_batch *b, int layer, float *hidden,
                            struct eb_err *e)
{
    struct policy_glue *g = ctx;
    double t0 = clock_now_s();
    int dim = g->m->cfg.n_embd, rc = 0;
    for (int s = 0; s < b->n_seq && rc == 0; s++) {
        const struct fwd_seq *q = &b->seqs[s];
        if (q->n_tokens - q->n_pad < 1) continue; /* pad rows are not steered */
        rc = g->p->ops->steer(g->p->self, q->id, layer, g->be,
                              hidden + ((size_t)q->row0 + q->n_pad) * dim,
                              q->n_tokens - q->n_pad, dim, e);
    }
    g->st.policy_s += clock_now_s() - t0;
    return rc;
}

/* ---- selection ---- */

/* Every head's keep-set is either -1 or distinct indices in [0, len). */
static int validate(struct policy_glue *g, const struct kvcache *c, struct eb_err *e)
{
    for (int l = 0; l < g->pm.n_layer; l++)
        for (int h = 0; h < g->pm.n_kv; h++) {
            int n = g->ks.n_keep[l * g->pm.n_kv + h], len = kvcache_len(c, l, h);
            if (n < 0) continue;
            if (n > len)
                return eb_fail(e, "policy %s: keep-set of %d slots for layer %d kv head %d holding "
                                  "%d", g->p->name, n, l, h, len);
            const int *idx = keep_set_head(&g->ks, l, h);
            memset(g->mark, 0, (size_t)len);
            for (int i = 0; i < n; i++) {
                if (idx[i] < 0 || idx[i] >= len)
                    return eb_fail(e, "policy %s: keep index %d out of range [0, %d) (layer %d, kv "
                                      "head %d)", g->p->name, idx[i], len, l, h);
                if (g->mark[idx[i]])
                    return eb_fail(e, "policy %s: duplicate keep index %d (layer %d, kv head %d)",
                                   g->p->name, idx[i], l, h);
                g->mark[idx[i]] = 1;
            }
        }
    return 0;
}

/* cache_view.rows of a 16-bit cache: its rows converted to f32 on demand. */
static const float *view_rows(const struct cache_view *v, int which, int layer, int kv_head)
{
    return kvcache_rows_f32(v->rows_ctx, which, layer, kv_head);
}

void glue_cache_view(const struct policy_glue *g, struct kvcache *c, int at_prefill,
                     struct cache_view *cv)
{
    *cv = (struct cache_view){
        .be = g->be,
        .n_layer = g->pm.n_layer,
        .n_head = g->pm.n_head,
        .n_kv = g->pm.n_kv,
        .head_dim = g->pm.head_dim,
        .capacity = c->capacity,
        .len = c->len,
        .pos = c->pos,
        .pad = c->pad, /* all zero unless the sequence was left-padded */
        /* an f32 cache is shown as it is; a 16-bit one through view_rows */
        .k = c->type == KV_F32 ? (float *const *)c->k : NULL,
        .v = c->type == KV_F32 ? (float *const *)c->v : NULL,
        .rows = c->type == KV_F32 ? NULL : view_rows,
        .rows_ctx = c,
        .next_pos = c->next_pos,
        .at_prefill = at_prefill,
        .rope_inv_freq = g->m->inv_freq,
        .rope_pairing = g->m->pairing,
    };
}

int glue_note_retention(struct policy_glue *g, int seq, const struct kvcache *c,
                        const int *n_keep, const int *keep, int stride, struct eb_err *e)
{
    if (!g->rec) return 0;
    for (int l = 0; l < g->pm.n_layer; l++)
        for (int h = 0; h < g->pm.n_kv; h++) {
            int head = l * g->pm.n_kv + h, n = n_keep[head];
            if (n >= 0 && n < kvcache_len(c, l, h) &&
                retention_evict(g->rec, seq, c, l, h, keep + (size_t)head * stride, n,
                                g->seqs[seq].n_steps, e))
                return -1;
        }
    return 0;
}

int glue_run_select(struct policy_glue *g, int seq, struct kvcache *c, int at_prefill,
                    struct eb_err *e)
{
    if (reserve_keep(g, c->capacity, e)) return -1;
    double t0 = clock_now_s();
    struct cache_view cv;
    glue_cache_view(g, c, at_prefill, &cv);
    if (g->qbuf) {
        for (int l = 0; l < g->pm.n_layer; l++) cv.n_q = kvcache_qring_gather(c, l, g->qbuf[l]);
        cv.q = g->qbuf;
    }
    keep_set_none(&g->ks);
    g->st.selections++;
    if (g->p->ops->select(g->p->self, seq, &cv, g->budget, &g->ks, e))
        return eb_wrap(e, g->p->name);
    if (validate(g, c, e)) return -1;
    double t1 = clock_now_s();
    g->st.select_s += t1 - t0;
    if (glue_note_retention(g, seq, c, g->ks.n_keep, g->ks.idx, g->ks.stride, e)) return -1;
    long evicted = 0;
    for (int l = 0; l < g->pm.n_layer; l++)
        for (int h = 0; h < g->pm.n_kv; h++) {
            int n = g->ks.n_keep[l * g->pm.n_kv + h], len = kvcache_len(c, l, h);
            if (n < 0) continue; /* n == len may still reorder the slots */
            if (kvcache_compact(c, l, h, keep_set_head(&g->ks, l, h), n, e) < 0) return -1;
            evicted += len - n;
        }
    if (evicted > 0) g->st.compressions++;
    g->st.evicted_slots += evicted;
    g->st.compact_s += clock_now_s() - t1;
    return 0;
}

/* ---- generation hooks ---- */

static int glue_begin(void *ctx, int seq, const struct gen_request *r, struct kvcache *cache,
                      struct eb_err *e)
{
    struct policy_glue *g = ctx;
    struct glue_seq *s = glue_seq(g, seq, e);
    if (!s) return -1;
    memset(s, 0, sizeof *s);
    if (sched_begin(&g->sched, &s->sched, g->p->name, e)) return -1;
    if (g->rec && retention_begin(g->rec, seq, r->n_prompt - cache->left_pad, e)) return -1;
    if (g->p->ops->begin_sequence) {
        /* The policy sees the real prompt: its positions start at 0, as the
         * cache's do; the pads are visible through cache_view.pad. */
        struct seq_view sv = {.n_prompt = r->n_prompt - cache->left_pad,
                              .capacity = cache->capacity, .prompt = r->prompt + cache->left_pad};
        if (g->p->ops->begin_sequence(g->p->self, seq, &sv, e)) return eb_wrap(e, g->p->name);
    }
    if (g->inner && g->inner->begin_sequence)
        return g->inner->begin_sequence(g->inner->ctx, seq, r, cache, e);
    return 0;
}

static int glue_step(void *ctx, int seq, int token, struct kvcache *cache, struct eb_err *e)
{
    struct policy_glue *g = ctx;
    double t0 = clock_now_s();
    struct glue_seq *s = glue_seq(g, seq, e);
    if (!s) return -1;
    s->n_steps++;
    int at_prefill = s->n_steps == 1;
    g->st.steps++;
    g->kv_bytes_sum += (double)cache->bytes;
    for (int i = 0; i < g->pm.n_layer * g->pm.n_kv; i++)
        if (cache->len[i] > g->st.max_slots) g->st.max_slots = cache->len[i];
    /* The count includes left pads (specs/policies.md §9.1 item 2): a padded
     * sequence starts at position -n_pad, so add them back. */
    long processed = (long)cache->next_pos + cache->left_pad;
    if (g->p->ops->observe) {
        struct step_view sv = {token, s->n_steps, cache->next_pos,
                               sched_selects_next(&g->sched, &s->sched, processed)};
        if (g->p->ops->observe(g->p->self, seq, &sv, e)) return eb_wrap(e, g->p->name);
    }
    int wants = sched_step(&g->sched, &s->sched, processed, at_prefill);
    if (wants && glue_batch_wants(g, cache)) {
        /* The batch's compression (after_step) runs it, then inner's on_step. */
        int rc = glue_batch_queue(g, seq, token, at_prefill, cache, e);
        g->st.policy_s += clock_now_s() - t0;
        return rc;
    }
    if (wants && glue_run_select(g, seq, cache, at_prefill, e)) return -1;
    g->st.policy_s += clock_now_s() - t0;
    if (g->inner && g->inner->on_step) return g->inner->on_step(g->inner->ctx, seq, token, cache, e);
    return 0;
}

static void glue_end(void *ctx, int seq, const struct gen_result *r)
{
    struct policy_glue *g = ctx;
    if (r->peak_kv_bytes > g->st.peak_kv_bytes) g->st.peak_kv_bytes = r->peak_kv_bytes;
    glue_batch_drop(g, seq);
    if (seq >= 0 && seq < g->seqs_cap) sched_end(&g->sched, &g->seqs[seq].sched);
    if (g->p->ops->end_sequence) g->p->ops->end_sequence(g->p->self, seq);
    if (g->inner && g->inner->end_sequence) g->inner->end_sequence(g->inner->ctx, seq, r);
}

static int glue_after_step(void *ctx, struct eb_err *e)
{
    struct policy_glue *g = ctx;
    if (policy_glue_flush(g, e)) return -1;
    if (g->inner && g->inner->after_step) return g->inner->after_step(g->inner->ctx, e);
    return 0;
}

int policy_glue_create(struct policy *p, int budget, const struct model *m,
                       struct policy_glue **out, struct eb_err *e)
{
    *out = NULL;
    if (policy_check_budget(p, budget, e)) return -1;
    const struct policy_info *in = &p->info;
    if ((in->needs & POLICY_NEED_ATTN_PROBS) && !p->ops->observe_attn)
        return eb_fail(e, "policy %s asks for attention probabilities but cannot observe them",
                       p->name);
    if ((in->needs & POLICY_NEED_HIDDEN_LAST) && !p->ops->observe_hidden)
        return eb_fail(e, "policy %s asks for hidden states but cannot observe them", p->name);
    if (policy_info_check(in, p->name, e)) return -1;
    struct policy_glue *g = eb_calloc(1, sizeof *g, e);
    if (!g) return -1;
    g->p = p;
    g->budget = budget;
    g->m = m;
    g->be = m->be;
    g->pm = policy_model_of(m);
    sched_run_init(&g->sched, in);
    g->ks.n_layer = g->pm.n_layer;
    g->ks.n_kv = g->pm.n_kv;
    g->ks.n_keep = eb_calloc((size_t)g->pm.n_layer * g->pm.n_kv, sizeof *g->ks.n_keep, e);
    if (!g->ks.n_keep) goto fail;
    if (in->needs & POLICY_NEED_RECENT_Q) {
        g->qbuf = eb_calloc((size_t)g->pm.n_layer, sizeof *g->qbuf, e);
        if (!g->qbuf) goto fail;
        size_t n = (size_t)in->q_window * g->pm.n_head * g->pm.head_dim;
        for (int l = 0; l < g->pm.n_layer; l++)
            if (!(g->qbuf[l] = g->be->alloc(g->be, n))) {
                eb_fail(e, "policy glue: out of memory for the query window");
                goto fail;
            }
    }
    g->mh.ctx = g;
    if (in->needs & POLICY_NEED_ATTN_PROBS) {
        g->mh.needs |= MODEL_NEED_ATTN_PROBS;
        g->mh.attn_probs = glue_attn_probs;
    }
    if (in->needs & POLICY_NEED_HIDDEN_LAST) {
        g->mh.needs |= MODEL_NEED_HIDDEN_LAST;
        g->mh.hidden_last = glue_hidden_last;
    }
    if (p->ops->steer) g->mh.after_layer = glue_after_layer;
    glue_batch_init(g);
    *out = g;
    return 0;
fail:
    policy_glue_free(g);
    return -1;
}

/* gen_hooks.device_bytes: what the policy allocates on the backend while a
 * generate runs: its scoring scratch (policies/score.c: two rows of a
 * head's scores), whatever it declares (policy_ops.device_bytes), and the
 * batched compression's scratch (policy_glue_scratch_bytes). */
static size_t glue_device_bytes(void *ctx, int n_live, int max_slots)
{
    struct policy_glue *g = ctx;
    if (g->p->info.schedule == POLICY_NEVER && !g->p->ops->steer) return 0;
    size_t n = backend_alloc_bytes(2 * (size_t)max_slots);
    if (g->p->ops->device_bytes) n += g->p->ops->device_bytes(g->p->self, &g->pm, n_live, max_slots);
    if (g->bt.on) n += policy_glue_scratch_bytes(g->p, g->budget, &g->m->cfg, n_live, max_slots);
    return n;
}

void policy_glue_hooks(struct policy_glue *g, const struct gen_hooks *inner,
                       struct gen_hooks *out)
{
    memset(out, 0, sizeof *out);
    g->inner = inner;
    out->ctx = g;
    out->model = g->mh.needs || g->mh.after_layer ? &g->mh : NULL;
    out->recent_q_window = g->qbuf ? g->p->info.q_window : 0;
    out->kv_slot_limit = sched_slot_limit(&g->sched, g->budget);
    out->begin_sequence = glue_begin;
    out->on_step = glue_step;
    out->after_step = glue_after_step;
    out->end_sequence = glue_end;
    out->device_bytes = glue_device_bytes;
}

void policy_glue_stats(const struct policy_glue *g, struct policy_glue_stats *out)
{
    *out = g->st;
    out->evicted_tokens = (double)g->st.evicted_slots / ((double)g->pm.n_layer * g->pm.n_kv);
    out->mean_kv_bytes = g->st.steps > 0 ? g->kv_bytes_sum / g->st.steps : 0.0;
}

int policy_glue_record_retention(struct policy_glue *g, int on, struct eb_err *e)
{
    if (!on) {
        retention_free(g->rec);
        g->rec = NULL;
        return 0;
    }
    return g->rec ? 0 : retention_create(g->pm.n_layer, g->pm.n_kv, &g->rec, e);
}

struct retention *policy_glue_retention(struct policy_glue *g)
{
    return g->rec;
}
