/* vase_attnv.c - VaSE-AttnV and its ablations (attn, range_attn, attn_rkv):
 * value ranges, window attention in the original's slot order, and the
 * keep-set of a head (see vase.c for the method and its sources). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "evict_rng.h"
#include "vase_priv.h"

const struct param_def vase_attnv_params[] = {
    {"window", PARAM_INT, 64, 1, 4096, NULL,
     "recent slots always kept; observation queries; eviction every window steps",
     offsetof(struct vase_attnv_params, window)},
    {"sinks", PARAM_INT, 4, 0, 4096, NULL, "first slots always protected",
     offsetof(struct vase_attnv_params, sinks)},
    {"protect", PARAM_FLOAT, 0.25, 0, 1, NULL,
     "n_large = protect * B slots of largest value range are kept",
     offsetof(struct vase_attnv_params, protect)},
    {"kernel", PARAM_INT, 5, 1, 63, NULL, "avg-pool smoothing of the scores (odd; 1: none)",
     offsetof(struct vase_attnv_params, kernel)},
    {"temperature", PARAM_FLOAT, 1, 1e-3, 1e3, NULL, "softmax temperature of the window scores",
     offsetof(struct vase_attnv_params, temperature)},
    {"sample", PARAM_BOOL, 1, 0, 1, NULL,
     "sample the unprotected slots (0: deterministic top-k, ablation range_attn)",
     offsetof(struct vase_attnv_params, sample)},
    {"slot_order", PARAM_CHOICE, 0, 0, 1, "vase|position",
     "smoothing neighbours: the original's slot order after compaction, or positions",
     offsetof(struct vase_attnv_params, slot_order)},
    {"seed", PARAM_INT, 0, 0, 2147483647, NULL, "eviction RNG seed (with the sequence id)",
     offsetof(struct vase_attnv_params, seed)},
    {"rkv_lambda", PARAM_FLOAT, 1, 0, 1, NULL,
     "< 1: VaSE's attn_rkv, score = lambda * attention - (1 - lambda) * key redundancy "
     "(needs sample=0, protect=0)", offsetof(struct vase_attnv_params, rkv_lambda)},
    {NULL, PARAM_INT, 0, 0, 0, NULL, NULL, 0},
};

/* Value range of slots [0, n) of (l, h) into s->range (physical order). */
static int value_range(struct vase *s, const struct cache_view *cv, int l, int h, int n,
                       struct eb_err *e)
{
    struct backend *be = cv->be;
    const float *v = cache_view_v(cv, l, h);
    int d = cv->head_dim;
    if (be->row_range) {
        if (be->row_range(be, s->dev, v, n, d)) return eb_fail(e, "value range failed");
        be->download(be, s->hf, s->dev, (size_t)n);
        for (int j = 0; j < n; j++) s->range[j] = s->hf[j];
        return 0;
    }
    be->download(be, s->hf, v, (size_t)n * d);
    for (int j = 0; j < n; j++) {
        const float *r = s->hf + (size_t)j * d;
        float lo = r[0], hi = r[0];
        for (int c = 1; c < d; c++) {
            if (r[c] < lo) lo = r[c];
            if (r[c] > hi) hi = r[c];
        }
        s->range[j] = (double)(hi - lo);
    }
    return 0;
}

/* Window attention of the candidates [0, n_cand) of (l, h), physical order:
 * per query head of the group, the mean over the window of the softmax over
 * the candidates; then the mean over the group (before smoothing, which is
 * linear, so the order does not matter). */
static int window_attention(struct vase *s, const struct cache_view *cv, int l, int h,
                            int n_cand, struct eb_err *e)
{
    struct backend *be = cv->be;
    if (!cv->q || cv->n_q < 1) return eb_fail(e, "no recent queries recorded");
    if (!be->window_scores) return eb_fail(e, "the %s backend has no window_scores", be->name);
    int rows = s->window < cv->n_q ? s->window : cv->n_q, group = cv->n_head / cv->n_kv;
    for (int j = 0; j < n_cand; j++) s->score[j] = 0.0;
    for (int g = 0; g < group; g++) {
        struct window_score_args a = score_window_args(cv, l, h, rows, n_cand, s->dev);
        a.n_kv = cv->n_head; /* one query head as its own group of one */
        a.kv_head = h * group + g;
        a.gqa = SCORE_GQA_MEAN;
        a.scale = (float)(1.0 / (sqrt((double)cv->head_dim) * s->temperature));
        if (be->window_scores(be, &a)) return eb_fail(e, "window attention scores failed");
        be->download(be, s->hf, s->dev, (size_t)n_cand);
        for (int j = 0; j < n_cand; j++) s->score[j] += s->hf[j] / group;
    }
    return 0;
}

/* s->l2p[i] = the physical slot of slot-order index i for (l, h). */
static void slot_order(struct vase *s, const struct vase_seq *q, const struct cache_view *cv,
                       int l, int h, int len, int n_cand)
{
    int head = l * cv->n_kv + h;
    const int *pos = cv->pos + (size_t)head * cv->capacity;
    for (int j = 0; j < len; j++) s->l2p[j] = j;
    if (s->positional || !q->n_ord || !q->n_ord[head]) return;
    int n = 0;
    memset(s->used, 0, (size_t)len * sizeof *s->used);
    const int *ord = q->ord + (size_t)head * q->ord_cap;
    for (int t = 0; t < q->n_ord[head]; t++) {
        int lo = 0, hi = len - 1, found = -1; /* positions ascend */
        while (lo <= hi) {
            int mid = (lo + hi) / 2;
            if (pos[mid] == ord[t]) { found = mid; break; }
            if (pos[mid] < ord[t]) lo = mid + 1;
            else hi = mid - 1;
        }
        if (found < 0 || s->used[found]) goto identity; /* not ours: fall back */
        s->used[found] = 1;
        s->l2p[n++] = found;
    }
    for (int j = 0; j < len; j++)
        if (!s->used[j]) s->l2p[n++] = j;
    /* The last window slots must be the newest in both orders. */
    for (int i = 0; i < n_cand; i++)
        if (s->l2p[i] >= n_cand) goto identity;
    return;
identity:
    for (int j = 0; j < len; j++) s->l2p[j] = j;
}

/* Remember the original's slot order (the n kept slots) for the next eviction. */
static void remember_order(struct vase *s, struct vase_seq *q, const struct cache_view *cv,
                           int l, int h, const int *keep, int n)
{
    if (s->positional || q->ord_cap < n) return;
    int head = l * cv->n_kv + h;
    const int *pos = cv->pos + (size_t)head * cv->capacity;
    int *ord = q->ord + (size_t)head * q->ord_cap;
    for (int i = 0; i < n; i++) ord[i] = pos[keep[i]];
    q->n_ord[head] = n;
}

static int cmp_int_asc(const void *pa, const void *pb)
{
    int a = *(const int *)pa, b = *(const int *)pb;
    return (a > b) - (a < b);
}

/* VaSE's attn_rkv (terarachang/VaSE, mode attn_rkv): s->score (smoothed, slot
 * order) mixed as lambda * S - (1 - lambda) * R, R_j = softmax_j of the mean
 * cosine of candidate j with every candidate (diagonal zeroed, no similarity
 * threshold), then the deterministic top-k in score order and the window. */
static int attn_rkv_head(struct vase *s, struct vase_seq *q, const struct cache_view *cv, int l,
                         int h, int len, int n_cand, int k, int *keep, struct eb_err *e)
{
    struct backend *be = cv->be;
    if (!be->key_redundancy) return eb_fail(e, "the %s backend has no key_redundancy", be->name);
    struct redundancy_args a = {
        .out = s->dev, .k = cache_view_k(cv, l, h), .len = n_cand, .head_dim = cv->head_dim,
        .threshold = 2.0f, /* above any cosine: nothing is zeroed */
        .no_match_zero_col0 = 0, .pad = cache_view_pad(cv, l, h),
    };
    if (be->key_redundancy(be, &a)) return eb_fail(e, "key redundancy of %d keys failed", n_cand);
    be->download(be, s->hf, s->dev, (size_t)n_cand);
    struct score_pair *rk = malloc((size_t)(n_cand > 0 ? n_cand : 1) * sizeof *rk);
    if (!rk) return eb_fail(e, "vase: out of memory for %d candidates", n_cand);
    double lam = s->rkv_lambda;
    for (int i = 0; i < n_cand; i++) {
        double z = lam * s->score[i] - (1.0 - lam) * s->hf[s->l2p[i]];
        if (s->pad[i]) z = -INFINITY;
        rk[i] = (struct score_pair){z, i};
    }
    qsort(rk, (size_t)n_cand, sizeof *rk, score_pair_cmp);
    int n = 0;
    for (int i = 0; i < k; i++) keep[n++] = s->l2p[rk[i].i];
    free(rk);
    if (s->positional) qsort(keep, (size_t)n, sizeof *keep, cmp_int_asc);
    for (int i = n_cand; i < len; i++) keep[n++] = s->l2p[i];
    remember_order(s, q, cv, l, h, keep, n);
    return n;
}

int vase_attnv_head(struct vase *s, struct vase_seq *q, const struct cache_view *cv, int seq,
                      int l, int h, int budget, int *keep, struct eb_err *e)
{
    int len = cache_view_len(cv, l, h), n_cand = len - s->window, k = budget - s->window;
    if (value_range(s, cv, l, h, n_cand, e) || window_attention(s, cv, l, h, n_cand, e))
        return -1;
    if (s->kernel > 1 && s->positional) {
        score_avg_pool(s->score, n_cand, s->kernel, s->tmp);
        memcpy(s->score, s->tmp, (size_t)n_cand * sizeof *s->tmp);
    }
    slot_order(s, q, cv, l, h, len, n_cand);
    const unsigned char *pad = cache_view_pad(cv, l, h);
    /* Into slot order: tmp = score, lk = range. */
    for (int i = 0; i < n_cand; i++) {
        s->tmp[i] = s->score[s->l2p[i]];
        s->lk[i] = s->range[s->l2p[i]];
        s->pad[i] = pad ? pad[s->l2p[i]] : 0;
    }
    if (s->kernel > 1 && !s->positional) score_avg_pool(s->tmp, n_cand, s->kernel, s->score);
    else memcpy(s->score, s->tmp, (size_t)n_cand * sizeof *s->tmp);
    if (s->rkv_lambda < 1.0) return attn_rkv_head(s, q, cv, l, h, len, n_cand, k, keep, e);
    if (s->sample) {
        struct evict_rng r;
        evict_rng_init(&r, s->seed, seq, l, q->evictions, h);
        for (int i = 0; i < n_cand; i++) s->gum[i] = evict_gumbel(evict_rng_uniform(&r));
    }
    struct vase_attnv_in in = {
        .n = n_cand,
        .n_sink = s->sinks,
        .n_large = (int)(s->protect * budget),
        .k = k,
        .range = s->lk,
        .score = s->score,
        .pad = pad ? s->pad : NULL,
        .gumbel = s->sample ? s->gum : NULL,
    };
    if (vase_attnv_select(&in, s->sel, e)) return -1;
    int n = 0;
    for (int i = 0; i < k; i++) keep[n++] = s->l2p[s->sel[i]];
    /* slot_order=position: the cache stays in position order */
    if (s->positional) qsort(keep, (size_t)n, sizeof *keep, cmp_int_asc);
    for (int i = n_cand; i < len; i++) keep[n++] = s->l2p[i];
    remember_order(s, q, cv, l, h, keep, n);
    return n;
}
