/* select.c - the shared selector (see select.h). */
#include "select.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "policies.h"

void selector_free(struct selector *s)
{
    if (!s) return;
    score_buf_free(&s->buf);
    free(s->z);
    free(s->one);
    memset(s, 0, sizeof *s);
}

static int reserve(struct selector *s, int len, struct eb_err *e)
{
    if (len <= s->cap) return 0;
    double *z = realloc(s->z, (size_t)len * sizeof *z);
    if (z) s->z = z;
    double *one = z ? realloc(s->one, (size_t)len * sizeof *one) : NULL;
    if (one) s->one = one;
    if (!z || !one) return eb_fail(e, "out of memory for %d scores", len);
    s->cap = len;
    return 0;
}

/* z[0, n_cand) of layer l: one head's scores, or the mean over its heads. */
static int layer_scores(const struct scorer *sc, void *self, struct selector *st, int seq,
                        const struct cache_view *cv, int l, int h, int n_cand, struct eb_err *e)
{
    if (!sc->per_layer) return sc->score(self, seq, cv, l, h, n_cand, st->z, e);
    memset(st->z, 0, (size_t)n_cand * sizeof *st->z);
    for (int g = 0; g < cv->n_kv; g++) {
        if (sc->score(self, seq, cv, l, g, n_cand, st->one, e)) return -1;
        for (int j = 0; j < n_cand; j++) st->z[j] += st->one[j];
    }
    for (int j = 0; j < n_cand; j++) st->z[j] /= cv->n_kv;
    return 0;
}

/* policy.h's keep-set contract as the selector builds it: n slots in
 * [0, len), distinct; by position strictly ascending; by score, the top
 * part among the candidates [0, n_cand) (distinct by score_topk_ranked),
 * then the window [n_cand, len) ascending.  For assert().  The top part is
 * checked slot by slot; the window, which score_keep_topk_window writes as
 * one run, by its count and its two ends, so the check costs O(top), not
 * O(budget) (StreamingLLM's 4 sinks beside a window of B - 4). */
static int keep_ok(const int *keep, int n, int n_cand, int len, enum keep_order order)
{
    int n_win = len - n_cand, n_top = n - n_win;
    if (n < 0 || n_top < 0) return 0;
    for (int i = 0; i < n_top; i++) {
        if (keep[i] < 0 || keep[i] >= n_cand) return 0;
        if (order == KEEP_BY_POSITION && i > 0 && keep[i] <= keep[i - 1]) return 0;
    }
    return n_win == 0 || (keep[n_top] == n_cand && keep[n - 1] == len - 1);
}

/* One keep-set for (l, h) (per_layer: h = 0, copied to every head). */
static int select_head(const struct scorer *sc, void *self, struct selector *st, int seq,
                       const struct cache_view *cv, int l, int h, int budget, int n_recent,
                       struct keep_set *out, struct eb_err *e)
{
    int len = cache_view_len(cv, l, h), n_cand = len - n_recent;
    assert(len >= 0 && len <= cv->capacity && len <= out->stride);
    if (sc->evict_above ? len <= budget : len < budget) return 0;
    if (reserve(st, len, e) || layer_scores(sc, self, st, seq, cv, l, h, n_cand, e)) return -1;
    score_round(st->z, n_cand, sc->dtype);
    if (sc->use_pads)
        score_apply_pads(st->z, n_cand, cache_view_pad(cv, l, h), sc->pads, sc->pad_score);
    int *keep = keep_set_head(out, l, h);
    int n = score_keep_topk_window(&st->buf, st->z, n_cand, len, budget - n_recent, sc->order,
                                   keep, e);
    if (n < 0) return -1;
    assert(n == budget && keep_ok(keep, n, n_cand, len, sc->order));
    int heads = sc->per_layer ? cv->n_kv : 1;
    for (int g = h; g < h + heads; g++) {
        if (g > h) memcpy(keep_set_head(out, l, g), keep, (size_t)n * sizeof *keep);
        out->n_keep[l * cv->n_kv + g] = n;
        if (sc->kept) sc->kept(self, seq, l, g, keep, n);
    }
    return 0;
}

int select_by_score(const struct scorer *sc, void *self, struct selector *st, int seq,
                    const struct cache_view *cv, int budget, int n_recent,
                    struct keep_set *out, struct eb_err *e)
{
    if (n_recent < 0 || n_recent > budget)
        return eb_fail(e, "budget %d cannot hold the %d most recent slots", budget, n_recent);
    keep_set_none(out);
    for (int l = 0; l < cv->n_layer; l++) {
        if (sc->per_layer) {
            int len = cache_view_len(cv, l, 0);
            for (int h = 1; h < cv->n_kv; h++)
                if (cache_view_len(cv, l, h) != len)
                    return eb_fail(e, "layer %d: kv heads hold different lengths (%d, %d) but "
                                      "the policy keeps one set per layer",
                                   l, len, cache_view_len(cv, l, h));
            if (select_head(sc, self, st, seq, cv, l, 0, budget, n_recent, out, e)) return -1;
            continue;
        }
        for (int h = 0; h < cv->n_kv; h++)
            if (select_head(sc, self, st, seq, cv, l, h, budget, n_recent, out, e)) return -1;
    }
    return 0;
}

const struct param_def scored_policy_params[] = {
    {"divide_length", PARAM_INT, 128, 1, 1 << 20, NULL, "compress every this many tokens",
     offsetof(struct scored_policy_params, divide_length)},
    {NULL, PARAM_INT, 0, 0, 0, NULL, NULL, 0},
};
