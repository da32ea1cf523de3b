/* lagkv.c - LagKV (arXiv 2504.04704) as kvpress runs it.
 * NVIDIA/kvpress @ 8bb29b9c3078452a86d692f29123fa6c793e2b05:
 * kvpress/presses/lagkv_press.py, scorer_press.py (topk), decoding_press.py
 * (DecodingPress as knorm.c: no compression at the prompt, then every
 * divide_length-th decoding forward compresses to the budget:
 * POLICY_DECODING).  Per kv head, over its L slots:
 *   - L < n_sink + 2 lag_size: the sinks score 1, slot j >= n_sink
 *     (j - n_sink) / (L - n_sink): the sinks and the newest slots are kept;
 *   - else [n_sink, end) in partitions of lag_size (a whole number of them),
 *     each but the last scored against the next: x = (row - min) / (max - min)
 *     per channel, min and max over the next partition's rows; a slot's
 *     unbiased std of x over its channels, softmaxed over its partition, for
 *     keys and for values, their mean; then its rank in the partition over
 *     lag_size (cross_scoring=1: the mean itself).  The sinks, the last
 *     partition and the rest after it score 1.
 * Scores in f64 (kvpress: the model dtype).  Ties, which torch leaves
 * unspecified: equal means rank as a stable argsort does (the lower slot
 * lower); in the top-k (equal ranks of different partitions, the 1s) the
 * lower slot first (score.h).  Cache order: kvpress gathers the kept slots
 * in top-k order, so its next compression would cut partitions out of that
 * order; the partitions are stretches of the sequence, so the cache stays in
 * position order (cache_order=score: kvpress's order, ties as above). */
#include <math.h>
#include <stdlib.h>

#include "policies.h"
#include "select_batch.h"

/* The values of lagkv_params (param_def.offset). */
struct lagkv_params {
    int n_sink;
    int lag_size;
    int cross_scoring;
    int cache_order;
    int divide_length;
};

const struct param_def lagkv_params[] = {
    {"n_sink", PARAM_INT, 4, 0, 1 << 20, NULL, "initial slots always kept",
     offsetof(struct lagkv_params, n_sink)},
    {"lag_size", PARAM_INT, 128, 2, 1 << 20, NULL, "partition size",
     offsetof(struct lagkv_params, lag_size)},
    {"cross_scoring", PARAM_BOOL, 0, 0, 1, NULL, "1: scores compared across partitions, no ranks",
     offsetof(struct lagkv_params, cross_scoring)},
    {"cache_order", PARAM_CHOICE, 1, 0, 1, KEEP_ORDER_CHOICES,
     "kept slots in top-k score order (kvpress) or by position",
     offsetof(struct lagkv_params, cache_order)},
    {"divide_length", PARAM_INT, 128, 1, 1 << 20, NULL, "compress every this many tokens",
     offsetof(struct lagkv_params, divide_length)},
    {NULL, PARAM_INT, 0, 0, 0, NULL, NULL, 0},
};

struct lagkv {
    struct scorer sc;
    struct selector sel;
    int n_sink, lag, cross, hd;
    double *mm;   /* [2][hd]: the reference partition's channel minima, maxima */
};

/* kvpress's _get_states_score for the lag rows x, the next lag rows their reference. */
static void lag_scores(const float *x, int lag, int hd, double *mm, double *out)
{
    const float *ref = x + (size_t)lag * hd;
    for (int c = 0; c < hd; c++) mm[c] = INFINITY, mm[hd + c] = -INFINITY;
    for (int t = 0; t < lag; t++)
        for (int c = 0; c < hd; c++) {
            mm[c] = fmin(mm[c], ref[(size_t)t * hd + c]);
            mm[hd + c] = fmax(mm[hd + c], ref[(size_t)t * hd + c]);
        }
    double top = -INFINITY, sum = 0.0;
    for (int t = 0; t < lag; t++) {
        const float *r = x + (size_t)t * hd;
        double mean = 0.0, var = 0.0;
        for (int c = 0; c < hd; c++) mean += (r[c] - mm[c]) / (mm[hd + c] - mm[c]) / hd;
        for (int c = 0; c < hd; c++) {
            double d = (r[c] - mm[c]) / (mm[hd + c] - mm[c]) - mean;
            var += d * d;
        }
        out[t] = sqrt(var / (hd - 1));
        top = fmax(top, out[t]);
    }
    for (int t = 0; t < lag; t++) sum += out[t] = exp(out[t] - top);
    for (int t = 0; t < lag; t++) out[t] /= sum;
}

static int lagkv_score(void *self, int seq, const struct cache_view *cv, int layer, int kv_head,
                       int n_cand, double *z, struct eb_err *e)
{
    (void)seq;
    struct lagkv *s = self;
    int S = s->n_sink, lag = s->lag, hd = cv->head_dim, L = n_cand;
    for (int j = 0; j < L; j++) z[j] = j < S ? 1.0 : (double)(j - S) / (L - S);
    if (L < S + 2 * lag) return 0;
    if (hd != s->hd || hd < 2) return eb_fail(e, "head_dim %d, expected %d (> 1)", hd, s->hd);
    const float *k, *v;
    if (score_host_kv(&s->sel.buf, cv, layer, kv_head, L, &k, &v, e)) return -1;
    double *w = s->sel.buf.work;
    int scored = ((L - S) / lag - 1) * lag;   /* every partition but the last */
    for (int a = S; a < S + scored; a += lag) {
        lag_scores(k + (size_t)a * hd, lag, hd, s->mm, z + a);
        lag_scores(v + (size_t)a * hd, lag, hd, s->mm, w + a);
        for (int j = a; j < a + lag; j++) w[j] = (z[j] + w[j]) / 2;
        for (int j = a; j < a + lag; j++) {   /* argsort().argsort() / lag, or the mean */
            int rank = 0;
            for (int i = a; i < a + lag; i++) rank += w[i] < w[j] || (w[i] == w[j] && i < j);
            z[j] = s->cross ? w[j] : (double)rank / lag;
        }
    }
    for (int j = S + scored; j < L; j++) z[j] = 1.0;
    return 0;
}

static int lagkv_create(const struct policy_params *p, const struct policy_model *m, void **self,
                        struct policy_info *info, struct eb_err *e)
{
    const struct lagkv_params *prm = policy_typed(p);
    struct lagkv *s = *self = eb_calloc(1, sizeof *s, e);
    if (!s) return -1;
    s->n_sink = prm->n_sink;
    s->lag = prm->lag_size;
    s->cross = prm->cross_scoring;
    s->hd = m->head_dim;
    s->sc = (struct scorer){.score = lagkv_score, .use_pads = 1, .pads = PAD_EVICT_FIRST,
        .pad_score = PAD_SCORE,
        .order = prm->cache_order == 0 ? KEEP_BY_SCORE : KEEP_BY_POSITION};
    if (!(s->mm = eb_calloc(2 * (size_t)m->head_dim, sizeof *s->mm, e))) {
        free(s);
        return -1;
    }
    *info = (struct policy_info){.schedule = POLICY_DECODING,
                                 .divide_length = prm->divide_length};
    return 0;
}

static void lagkv_destroy(void *self)
{
    struct lagkv *s = self;
    if (!s) return;
    selector_free(&s->sel);
    free(s->mm);
    free(s);
}

static int lagkv_select(void *self, int seq, const struct cache_view *cv, int budget,
                        struct keep_set *out, struct eb_err *e)
{
    struct lagkv *s = self;
    return select_by_score(&s->sc, s, &s->sel, seq, cv, budget, 0, out, e);
}

/* The whole batch: each head's lag scores computed on the host as select
 * computes them (its keys and values downloaded), a row per head, ranked and
 * compacted on the device. */
static int lagkv_batch_plan(const void *self, int budget, struct batch_plan *out)
{
    const struct lagkv *s = self;
    (void)budget;
    if (!select_batch_plan_of(&s->sc, 0, out)) return 0;
    out->score = BATCH_SCORE_Z;
    out->host_scores = lagkv_score;
    return 1;
}

const struct policy_ops lagkv_ops = {.name = "lagkv", .create = lagkv_create,
    .destroy = lagkv_destroy, .select = lagkv_select, .batch_plan = lagkv_batch_plan};
