/* row.c - the policy the registry builds from a scorer row (row.h): its
 * create, destroy and select on the shared selector, its batched plan, the
 * attention sums (the "scores so far") a row that asks for attention
 * probabilities reads through ctx_attn_sum, and the follower's hooks
 * (row_follow.c) for a row that composes one. */
#include "row.h"

#include <stdlib.h>
#include <string.h>

#include "policies.h"
#include "row_priv.h"
#include "row_views.h"

/* A sequence's attention sums: [n_layer * n_kv][cap]. */
struct row_sums {
    double *sum;
    int cap;
};

static int n_recent_at(const struct row_policy *s, int budget)
{
    return s->row->recent ? s->row->recent(s->prm, budget) : s->cfg.info.window;
}

static const double *head_sums(const struct row_policy *s, int seq, int layer, int kv_head,
                               int *cap)
{
    const struct row_sums *q = seq_table_get(&s->sums, seq);
    if (!q || !q->sum) return NULL;
    *cap = q->cap;
    return q->sum + ((size_t)layer * s->m.n_kv + kv_head) * q->cap;
}

/* A fresh context for (seq, layer, kv head): the views stale, the
 * sequence's attention sums and follower in it.  0, or -1 with e set. */
static int head_ctx(struct row_policy *s, int seq, const struct cache_view *cv, int layer,
                    int kv_head, int n_cand, struct score_ctx *c, struct eb_err *e)
{
    int cap = 0;
    const double *sum = head_sums(s, seq, layer, kv_head, &cap);
    *c = (struct score_ctx){.cv = cv, .prm = s->prm, .state = s->state, .seq = seq,
                            .layer = layer, .kv_head = kv_head,
                            .len = cache_view_len(cv, layer, kv_head), .n_cand = n_cand,
                            .views = s->views};
    if (s->f && follower_live(s->f, seq, &c->follow, e)) return -1;
    row_views_begin(s->views, &s->sel.buf, sum, sum ? cap : 0);
    return 0;
}

/* The selector's score callback: the row's score on a fresh context. */
static int row_score(void *self, int seq, const struct cache_view *cv, int layer, int kv_head,
                     int n_cand, double *z, struct eb_err *e)
{
    struct row_policy *s = self;
    struct score_ctx c;
    if (head_ctx(s, seq, cv, layer, kv_head, n_cand, &c, e) || s->row->score(&c, z, e))
        return -1;
    return s->cfg.add ? s->row->add(&c, z, e) : 0;
}

/* The batched plan's added row: the row's add on zeros, for the head. */
static int row_add_row(void *self, int seq, const struct cache_view *cv, int layer, int kv_head,
                       int n_cand, float *add, struct eb_err *e)
{
    struct row_policy *s = self;
    struct score_ctx c;
    if (head_ctx(s, seq, cv, layer, kv_head, n_cand, &c, e)) return -1;
    if (n_cand > s->add_cap) {
        double *z = realloc(s->add_z, (size_t)n_cand * sizeof *z);
        if (!z) return eb_fail(e, "out of memory for %d scores", n_cand);
        s->add_z = z;
        s->add_cap = n_cand;
    }
    for (int j = 0; j < n_cand; j++) s->add_z[j] = 0.0;
    if (s->row->add(&c, s->add_z, e)) return -1;
    for (int j = 0; j < n_cand; j++) add[j] = (float)s->add_z[j];
    return 0;
}

/* The kept slots keep their sums, in the compacted order. */
static void row_kept(void *self, int seq, int layer, int kv_head, const int *keep, int n)
{
    struct row_policy *s = self;
    struct row_sums *q = seq_table_get(&s->sums, seq);
    if (!q || !q->sum) return;
    double *sum = q->sum + ((size_t)layer * s->m.n_kv + kv_head) * q->cap;
    for (int i = 0; i < n; i++) sum[i] = sum[keep[i]];
    memset(sum + n, 0, (size_t)(q->cap - n) * sizeof *sum);
}

static int configure(const struct scorer_row *row, const void *prm, struct row_config *c,
                     struct eb_err *e)
{
    *c = row->base;
    return row->configure ? row->configure(prm, c, e) : 0;
}

int row_window(const struct scorer_row *row, const struct policy_params *p, struct eb_err *e)
{
    struct row_config c;
    return configure(row, policy_typed(p), &c, e) ? -1 : c.info.window;
}

static void row_destroy(void *self)
{
    struct row_policy *s = self;
    if (!s) return;
    if (s->state && s->row->state) s->row->state->destroy(s->state);
    if (s->f) follower_close(s->f);
    free(s->f);
    free(s->add_z);
    selector_free(&s->sel);
    row_views_free(s->views);
    seq_table_free(&s->sums, free);
    free(s);
}

int row_create(const struct scorer_row *row, const struct policy_params *p,
               const struct policy_model *m, void **self, struct policy_info *info,
               struct eb_err *e)
{
    struct row_policy *s = *self = eb_calloc(1, sizeof *s, e);
    if (!s) return -1;
    s->row = row;
    s->m = *m;
    memcpy(s->prm, policy_typed(p), sizeof s->prm);
    if (configure(row, s->prm, &s->cfg, e) || !(s->views = row_views_new(e)) ||
        (row->state && row->state->create(s->prm, m, &s->state, e)) ||
        (row->follow && row_follow_open(s, e))) {
        row_destroy(s);
        *self = NULL;
        return -1;
    }
    s->sc = s->cfg.sel;
    s->sc.score = row_score;
    if (s->cfg.info.needs & POLICY_NEED_ATTN_PROBS) s->sc.kept = row_kept;
    *info = s->cfg.info;
    return 0;
}

static void sums_free(void *p)
{
    struct row_sums *q = p;
    if (q) free(q->sum);
    free(q);
}

static int row_begin(void *self, int seq, const struct seq_view *sv, struct eb_err *e)
{
    struct row_policy *s = self;
    if (s->f && follower_begin(s->f, seq, sv, e)) return -1;
    if (s->cfg.info.needs & POLICY_NEED_ATTN_PROBS) {
        struct row_sums *q = seq_table_fresh(&s->sums, seq, sizeof *q, sums_free, e);
        if (!q) return -1;
        q->cap = sv->capacity;
        q->sum = eb_calloc((size_t)s->m.n_layer * s->m.n_kv * (size_t)q->cap, sizeof *q->sum, e);
        if (!q->sum) return -1;
    }
    const struct row_state_ops *st = s->row->state;
    return st && st->begin_sequence ? st->begin_sequence(s->state, seq, sv, e) : 0;
}

static void row_end(void *self, int seq)
{
    struct row_policy *s = self;
    if (s->f) follower_end(s->f, seq);
    seq_table_drop(&s->sums, seq, sums_free);
    const struct row_state_ops *st = s->row->state;
    if (st && st->end_sequence) st->end_sequence(s->state, seq);
}

/* Each slot's sum gains the attention its kv head's query heads paid it,
 * their mean (H2O with GQA). */
static int row_observe_attn(void *self, int seq, const struct attn_view *a, struct eb_err *e)
{
    (void)e;
    struct row_policy *s = self;
    struct row_sums *q = seq_table_get(&s->sums, seq);
    if (!q || !q->sum || a->layer < 0 || a->layer >= s->m.n_layer || a->n_head != s->m.n_head)
        return 0;
    int group = s->m.n_head / s->m.n_kv;
    for (int g = 0; g < s->m.n_kv; g++) {
        double *sum = q->sum + ((size_t)a->layer * s->m.n_kv + g) * q->cap;
        int len = a->kv_len[g] < q->cap ? a->kv_len[g] : q->cap;
        if (len > a->cap) len = a->cap;
        for (int hq = g * group; hq < (g + 1) * group; hq++)
            for (int r = 0; r < a->n_new; r++) {
                const float *p = a->probs + ((size_t)hq * a->n_new + r) * a->cap;
                for (int j = 0; j < len; j++) sum[j] += (double)p[j] / group;
            }
    }
    return 0;
}

static int row_select(void *self, int seq, const struct cache_view *cv, int budget,
                      struct keep_set *out, struct eb_err *e)
{
    struct row_policy *s = self;
    if (!s->row->score) {   /* a row that never selects */
        keep_set_none(out);
        return 0;
    }
    if ((s->cfg.info.needs & POLICY_NEED_ATTN_PROBS) && !seq_table_get(&s->sums, seq))
        return eb_fail(e, "sequence %d was not begun", seq);
    return select_by_score(&s->sc, s, &s->sel, seq, cv, budget, n_recent_at(s, budget), out, e);
}

/* Batched, for a row with no plan of its own: its scores computed on the
 * host as select would, a row per head, ranked on the device. */
static int row_host_scores(void *self, int seq, const struct cache_view *cv, int layer,
                           int kv_head, int n_cand, double *z, struct eb_err *e)
{
    struct row_policy *s = self;
    if ((s->cfg.info.needs & POLICY_NEED_ATTN_PROBS) && !seq_table_get(&s->sums, seq))
        return eb_fail(e, "sequence %d was not begun", seq);
    return row_score(self, seq, cv, layer, kv_head, n_cand, z, e);
}

static int row_batch_plan(const void *self, int budget, struct batch_plan *out)
{
    const struct row_policy *s = self;
    if (!s->row->score || !select_batch_plan_of(&s->sc, n_recent_at(s, budget), out)) return 0;
    if (s->row->batch) {
        if (!s->row->batch(s->prm, &s->cfg, out)) return 0;
        if (s->cfg.add) out->add_row = row_add_row;
        return 1;
    }
    if (s->sc.per_layer) return 0;   /* host scores (with the add) rank one head at a time */
    out->score = BATCH_SCORE_Z;
    out->host_scores = row_host_scores;
    out->kept = s->sc.kept;
    return 1;
}

static const struct scorer *row_scorer(const void *self, int *n_recent)
{
    const struct row_policy *s = self;
    *n_recent = s->cfg.info.window;
    /* a budget-dependent window, or a follower's state, does not wrap */
    return s->row->recent || s->f || !s->row->score ? NULL : &s->sc;
}

static const struct policy_ops row_policy_ops = {
    .name = "row",
    .destroy = row_destroy,
    .begin_sequence = row_begin,
    .end_sequence = row_end,
    .observe_attn = row_observe_attn,
    .select = row_select,
    .batch_plan = row_batch_plan,
    .scorer = row_scorer,
};

/* The same with the follower's hooks (row_follow.c). */
static const struct policy_ops row_follow_policy_ops = {
    .name = "row",
    .destroy = row_destroy,
    .begin_sequence = row_begin,
    .end_sequence = row_end,
    .observe = row_follow_observe,
    .observe_attn = row_observe_attn,
    .observe_hidden = row_follow_observe_hidden,
    .select = row_select,
    .steer = row_follow_steer,
    .trace_stats = row_follow_trace_stats,
    .trace_sentences = row_follow_trace_sentences,
    .batch_plan = row_batch_plan,
    .scorer = row_scorer,
};

const struct policy_ops *row_ops_of(const struct scorer_row *row)
{
    return row->follow ? &row_follow_policy_ops : &row_policy_ops;
}

int row_configure_decoding(const void *prm, struct row_config *c, struct eb_err *e)
{
    (void)e;
    const struct scored_policy_params *p = prm;
    c->info.schedule = POLICY_DECODING;
    c->info.divide_length = p->divide_length;
    return 0;
}
