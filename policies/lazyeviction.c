/* lazyeviction.c - LazyEviction (arXiv 2506.15969): lagged eviction by
 * recurrence intervals.  Released code, Halo-949/LazyEviction, read as
 * imported in WeianMao/triattention @ e7a0eb18d056659570035708cda25f6bb6cda333:
 * LazyEviction/model/temp_cacheobs.py (TempCache.record_recurrence),
 * model/kv_utils.py (Window_LAZYKVCluster.update_kv_in_decoding),
 * model/qwen_model.py (observation_counter), evaluation.py (obs_size =
 * decoding_recent_size, alpha).
 *
 * Every decoding forward m (1, 2, ... after the prompt) tracks, per query
 * head and slot, the last forward whose attention to it was >= alpha and
 * the longest gap between two such forwards (its MRI, maximum recurrence
 * interval); a slot starts as seen at forward m - 1 (the prompt's slots: at
 * 0) with MRI 0.  The prompt's forward tracks nothing.  At every forward m
 * divisible by W, a head over B slots keeps its W newest slots and the
 * B - W others of best importance
 *     2 / (1 + exp(1 + (m - last) / (MRI + 1e-5))) + (MRI ? 2 / (1 + exp(MRI - 1)) : 0).
 * The state is per query head, so it cannot be a stateless scorer; with GQA
 * a slot's importance is the mean over its group (the released code repeats
 * the kv heads and evicts each query head on its own).  Deviations:
 * policies/README.md. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "policies.h"
#include "select_batch.h"

/* The values of lazyeviction_params (param_def.offset). */
struct lazyeviction_params {
    int window;
    double alpha;
};

const struct param_def lazyeviction_params[] = {
    {"window", PARAM_INT, 128, 1, 1 << 20, NULL,
     "W: the newest slots always kept, and eviction every W decoding steps",
     offsetof(struct lazyeviction_params, window)},
    {"alpha", PARAM_FLOAT, 1e-4, 0, 1, NULL, "attention at or above which a slot recurs",
     offsetof(struct lazyeviction_params, alpha)},
    {NULL, PARAM_INT, 0, 0, 0, NULL, NULL, 0},
};

struct lazy_seq {
    int cap;
    int *last, *mri;   /* [n_layer][n_head][cap]: per query head, in cache slot order */
    int *tracked;      /* [n_layer][n_kv]: slots that have state */
    int m_next;        /* the decoding forward the next forward is (0: the prompt's) */
    int m;             /* the last forward observed */
};

struct lazy {
    int window;
    double alpha;
    struct scorer sc;
    struct policy_model pm;
    struct seq_table seqs;
    struct selector sel;
};

static double importance(int m, int last, int mri)
{
    double s = mri == 0 ? 0.0 : 2.0 / (1.0 + exp(mri - 1.0));
    return 2.0 / (1.0 + exp(1.0 + (m - last) / (mri + 1e-5))) + s;
}

static int lazy_score(void *self, int seq, const struct cache_view *cv, int layer, int kv_head,
                      int n_cand, double *z, struct eb_err *e)
{
    struct lazy *s = self;
    struct lazy_seq *q = seq_table_get(&s->seqs, seq);
    int group = s->pm.n_head / s->pm.n_kv;
    if (!q) return eb_fail(e, "sequence %d was not begun", seq);
    if (cache_view_len(cv, layer, kv_head) > q->tracked[layer * s->pm.n_kv + kv_head])
        return eb_fail(e, "layer %d kv head %d: slots without recurrence state", layer, kv_head);
    for (int j = 0; j < n_cand; j++) z[j] = 0;
    for (int h = kv_head * group; h < (kv_head + 1) * group; h++) {
        size_t at = ((size_t)layer * s->pm.n_head + h) * q->cap;
        for (int j = 0; j < n_cand; j++) z[j] += importance(q->m, q->last[at + j], q->mri[at + j]);
    }
    for (int j = 0; j < n_cand; j++) z[j] /= group;
    return 0;
}

/* The kept slots keep their state, in the compacted order. */
static void lazy_kept(void *self, int seq, int layer, int kv_head, const int *keep, int n)
{
    struct lazy *s = self;
    struct lazy_seq *q = seq_table_get(&s->seqs, seq);
    int group = s->pm.n_head / s->pm.n_kv;
    for (int h = kv_head * group; h < (kv_head + 1) * group; h++) {
        int *last = q->last + ((size_t)layer * s->pm.n_head + h) * q->cap;
        int *mri = q->mri + ((size_t)layer * s->pm.n_head + h) * q->cap;
        for (int i = 0; i < n; i++) {
            last[i] = last[keep[i]];
            mri[i] = mri[keep[i]];
        }
    }
    q->tracked[layer * s->pm.n_kv + kv_head] = n;
}

static int lazy_create(const struct policy_params *p, const struct policy_model *m, void **self,
                       struct policy_info *info, struct eb_err *e)
{
    const struct lazyeviction_params *prm = policy_typed(p);
    if (m->n_kv < 1 || m->n_head % m->n_kv)
        return eb_fail(e, "%d query heads do not split into %d kv heads", m->n_head, m->n_kv);
    struct lazy *s = *self = eb_calloc(1, sizeof *s, e);
    if (!s) return -1;
    s->window = prm->window;
    s->alpha = prm->alpha;
    s->pm = *m;
    s->sc = (struct scorer){.score = lazy_score, .kept = lazy_kept, .evict_above = 1,
                            .use_pads = 1, .pads = PAD_EVICT_FIRST, .pad_score = PAD_SCORE,
                            .order = KEEP_BY_POSITION};
    /* the released obs_count % obs_size == 0 over decoding forwards */
    *info = (struct policy_info){.needs = POLICY_NEED_ATTN_PROBS, .window = s->window,
                                 .schedule = POLICY_DECODING, .divide_length = s->window};
    return 0;
}

static void lazy_seq_free(void *p)
{
    struct lazy_seq *q = p;
    if (!q) return;
    free(q->last);
    free(q->mri);
    free(q->tracked);
    free(q);
}

static void lazy_destroy(void *self)
{
    struct lazy *s = self;
    if (!s) return;
    seq_table_free(&s->seqs, lazy_seq_free);
    selector_free(&s->sel);
    free(s);
}

static int lazy_begin(void *self, int seq, const struct seq_view *sv, struct eb_err *e)
{
    struct lazy *s = self;
    struct lazy_seq *q = seq_table_fresh(&s->seqs, seq, sizeof *q, lazy_seq_free, e);
    if (!q) return -1;
    size_t n = (size_t)s->pm.n_layer * s->pm.n_head * sv->capacity;
    q->cap = sv->capacity;
    q->last = eb_calloc(n ? n : 1, sizeof *q->last, e);
    q->mri = q->last ? eb_calloc(n ? n : 1, sizeof *q->mri, e) : NULL;
    q->tracked = q->mri ? eb_calloc((size_t)s->pm.n_layer * s->pm.n_kv, sizeof *q->tracked, e)
                        : NULL;
    return q->tracked ? 0 : -1;
}

static void lazy_end(void *self, int seq)
{
    seq_table_drop(&((struct lazy *)self)->seqs, seq, lazy_seq_free);
}

/* A token was sampled: the next forward is decoding forward n_generated. */
static int lazy_observe(void *self, int seq, const struct step_view *sv, struct eb_err *e)
{
    struct lazy_seq *q = seq_table_get(&((struct lazy *)self)->seqs, seq);
    if (!q) return eb_fail(e, "sequence %d was not begun", seq);
    q->m_next = sv->n_generated;
    return 0;
}

/* record_recurrence: new slots start as seen at m - 1; a slot that gets at
 * least alpha recurs now, and its gap since the last time may raise its MRI. */
static int lazy_observe_attn(void *self, int seq, const struct attn_view *a, struct eb_err *e)
{
    struct lazy *s = self;
    struct lazy_seq *q = seq_table_get(&s->seqs, seq);
    if (!q) return eb_fail(e, "sequence %d was not begun", seq);
    if (q->m_next == 0) return 0;   /* the prompt's forward */
    if (a->layer < 0 || a->layer >= s->pm.n_layer || a->n_head != s->pm.n_head)
        return eb_fail(e, "attention of layer %d with %d heads", a->layer, a->n_head);
    int m = q->m = q->m_next, group = s->pm.n_head / s->pm.n_kv;
    for (int g = 0; g < s->pm.n_kv; g++) {
        int len = a->kv_len[g], *tracked = &q->tracked[a->layer * s->pm.n_kv + g];
        if (len > q->cap || len > a->cap)
            return eb_fail(e, "kv head %d holds %d slots, more than %d", g, len, q->cap);
        for (int h = g * group; h < (g + 1) * group; h++) {
            size_t at = ((size_t)a->layer * s->pm.n_head + h) * q->cap;
            int *last = q->last + at, *mri = q->mri + at;
            for (int j = *tracked; j < len; j++) last[j] = m - 1, mri[j] = 0;
            for (int j = 0; j < len; j++) {
                int recurs = 0;
                for (int r = 0; r < a->n_new && !recurs; r++)
                    recurs = a->probs[((size_t)h * a->n_new + r) * a->cap + j] >= s->alpha;
                if (!recurs) continue;
                if (m - last[j] > mri[j]) mri[j] = m - last[j];
                last[j] = m;
            }
        }
        if (len > *tracked) *tracked = len;
    }
    return 0;
}

static int lazy_select(void *self, int seq, const struct cache_view *cv, int budget,
                       struct keep_set *out, struct eb_err *e)
{
    struct lazy *s = self;
    return select_by_score(&s->sc, s, &s->sel, seq, cv, budget, s->window, out, e);
}

/* The whole batch, as h2o.c: the importances live on the host, so they go
 * up as a row per head, ranked on the device; lazy_kept moves the state
 * once the keep-sets are back. */
static int lazy_batch_plan(const void *self, int budget, struct batch_plan *out)
{
    const struct lazy *s = self;
    if (!select_batch_plan_of(&s->sc, s->window, out)) return 0;
    (void)budget;
    out->score = BATCH_SCORE_Z;
    out->host_scores = lazy_score;
    out->kept = lazy_kept;
    return 1;
}

/* policy_ops.window_of: the slots always kept. */
static int lazyeviction_window_of(const void *prm)
{
    return ((const struct lazyeviction_params *)prm)->window;
}

const struct policy_ops lazyeviction_ops = {
    .name = "lazyeviction",
    .create = lazy_create,
    .destroy = lazy_destroy,
    .begin_sequence = lazy_begin,
    .end_sequence = lazy_end,
    .observe = lazy_observe,
    .observe_attn = lazy_observe_attn,
    .select = lazy_select,
    .batch_plan = lazy_batch_plan,
    .window_of = lazyeviction_window_of,
};
