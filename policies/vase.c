/* vase.c - VaSE (value-aware stochastic eviction) and its CUR baseline,
 * from ../shared/specs/vase_beaconkv.md §2 (transcribed from the official code):
 *
 *   vase-attnv  per kv head, keep the B/4 slots whose value rows have the
 *               largest range (max - min over channels; the 4 first slots
 *               forced in), then sample the rest without replacement in
 *               proportion to the window attention score (last 64 queries,
 *               softmax over the candidates, mean over the window, avg-pool
 *               5, mean over the group's query heads);
 *   vase-dkv    keep the top slots by |k G|^2 * |v G|^2 with a Gaussian
 *               sketch G (head_dim x 20) drawn afresh at every eviction;
 *   curdkv      the same with one sketch per layer, drawn at the first
 *               eviction (a registry preset: sketch=fixed).
 *
 * Trigger (§2.2): after a decode step, a head holding more than B slots, a
 * multiple of the window W = 64, is compressed to B = (B - W) chosen
 * candidates + the W most recent slots.  So the cache oscillates between B
 * and B + W and the prompt is never compressed at prefill nor protected.
 * The policy runs on every step (POLICY_EVERY_STEP) and checks this itself,
 * because the condition is on the head's occupancy, not on the token count;
 * it asks the runtime for B + W (+2) slots per head (policy_info.slot_slack),
 * and compresses early only if a prompt longer than B fills that.
 *
 * Slot order: the original writes the chosen candidates to slots [0, K) in
 * selection order (not by position), and the kernel-5 smoothing runs over
 * slot neighbours.  model/ keeps slots in position order, so each sequence
 * remembers, per head, the positions in the original's slot order and the
 * smoothing follows it (slot_order=vase; slot_order=position smooths over
 * token neighbours instead).
 *
 * Randomness: the Gumbel noise of the sampling and the sketches come from
 * evict_rng streams keyed by (seed, sequence, layer, eviction, kv head), so
 * a run is reproducible whatever the batch.  Deviations: f32 throughout
 * (the original scores in bf16). */
#include "vase.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "evict_rng.h"
#include "policies.h"
#include "score.h"

/* ---- the rules on host arrays (vase.h) ---- */

int vase_attnv_select(const struct vase_attnv_in *in, int *out, struct eb_err *e)
{
    int n = in->n, k = in->k;
    if (n < 0 || k < 0 || k > n) return eb_fail(e, "vase: keep %d of %d candidates", k, n);
    int n_large = in->n_large < 0 ? 0 : in->n_large > k ? k : in->n_large;
    struct score_pair *rk = malloc((size_t)(n ? n : 1) * sizeof *rk);
    double *fallback = malloc((size_t)(n ? n : 1) * sizeof *fallback);
    double *w = malloc((size_t)(n ? n : 1) * sizeof *w);
    double *zero = calloc((size_t)(n ? n : 1), sizeof *zero);
    unsigned char *taken = calloc((size_t)(n ? n : 1), 1);
    int rc = -1;
    if (!rk || !fallback || !w || !zero || !taken) {
        eb_fail(e, "vase: out of memory for %d candidates", n);
        goto done;
    }
    for (int j = 0; j < n; j++) {
        double r = j < in->n_sink ? INFINITY : in->range[j];
        if (in->pad && in->pad[j]) r = -INFINITY;
        fallback[j] = r;
        rk[j] = (struct score_pair){r, j};
    }
    qsort(rk, (size_t)n, sizeof *rk, score_pair_cmp);
    for (int t = 0; t < n_large; t++) {
        out[t] = rk[t].i;
        taken[rk[t].i] = 1;
    }
    for (int j = 0; j < n; j++)
        w[j] = taken[j] || (in->pad && in->pad[j]) ? 0.0 : in->score[j];
    if (evict_sample_topk(w, in->gumbel ? in->gumbel : zero, taken, fallback, n, k - n_large,
                          out + n_large, e) < 0)
        goto done;
    rc = 0;
done:
    free(rk);
    free(fallback);
    free(w);
    free(zero);
    free(taken);
    return rc;
}

int vase_dkv_select(int n, int n_sink, int k, const double *lk, const double *lv,
                    const unsigned char *pad, int *out, struct eb_err *e)
{
    if (n < 0 || k < 0 || k > n) return eb_fail(e, "vase: keep %d of %d candidates", k, n);
    struct score_pair *rk = malloc((size_t)(n ? n : 1) * sizeof *rk);
    if (!rk) return eb_fail(e, "vase: out of memory for %d candidates", n);
    double sum = 0.0;
    for (int j = 0; j < n; j++) sum += lk[j] * lv[j];
    for (int j = 0; j < n; j++) {
        double s = sum > 0 ? lk[j] * lv[j] / sum : lk[j] * lv[j];
        if (j < n_sink) s = 1.0;
        if (pad && pad[j]) s = -1.0;
        rk[j] = (struct score_pair){s, j};
    }
    qsort(rk, (size_t)n, sizeof *rk, score_pair_cmp);
    for (int t = 0; t < k; t++) out[t] = rk[t].i;
    free(rk);
    return 0;
}

/* ---- the policies ---- */

enum vase_mode { VASE_ATTNV, VASE_DKV };

const struct param_def vase_attnv_params[] = {
    {"window", PARAM_INT, 64, 1, 4096, NULL,
     "recent slots always kept; observation queries; eviction every window steps"},
    {"sinks", PARAM_INT, 4, 0, 4096, NULL, "first slots always protected"},
    {"protect", PARAM_FLOAT, 0.25, 0, 1, NULL,
     "n_large = protect * B slots of largest value range are kept"},
    {"kernel", PARAM_INT, 5, 1, 63, NULL, "avg-pool smoothing of the scores (odd; 1: none)"},
    {"temperature", PARAM_FLOAT, 1, 1e-3, 1e3, NULL, "softmax temperature of the window scores"},
    {"sample", PARAM_BOOL, 1, 0, 1, NULL,
     "sample the unprotected slots (0: deterministic top-k, ablation range_attn)"},
    {"slot_order", PARAM_CHOICE, 0, 0, 1, "vase|position",
     "smoothing neighbours: the original's slot order after compaction, or positions"},
    {"seed", PARAM_INT, 0, 0, 2147483647, NULL, "eviction RNG seed (with the sequence id)"},
    {"rkv_lambda", PARAM_FLOAT, 1, 0, 1, NULL,
     "< 1: VaSE's attn_rkv, score = lambda * attention - (1 - lambda) * key redundancy "
     "(needs sample=0, protect=0)"},
    {NULL, PARAM_INT, 0, 0, 0, NULL, NULL},
};

const struct param_def vase_dkv_params[] = {
    {"window", PARAM_INT, 64, 1, 4096, NULL,
     "recent slots always kept; eviction every window steps"},
    {"sinks", PARAM_INT, 4, 0, 4096, NULL, "first slots always kept (score 1.0)"},
    {"rank", PARAM_INT, 20, 1, 4096, NULL, "columns of the Gaussian sketch"},
    {"sketch", PARAM_CHOICE, 0, 0, 1, "resample|fixed",
     "draw the sketch at every eviction (VaSE-DKV) or once per layer (CurDKV)"},
    {"seed", PARAM_INT, 0, 0, 2147483647, NULL, "eviction RNG seed (with the sequence id)"},
    {NULL, PARAM_INT, 0, 0, 0, NULL, NULL},
};

struct vase_seq {
    int evictions;
    int *ord;                 /* attnv: [n_layer * n_kv][ord_cap] positions in slot order */
    int *n_ord;               /* [n_layer * n_kv]; 0: slot order = position order */
    int ord_cap;
    float *sketch;            /* dkv fixed: [n_layer][rank * head_dim] host, W = G^T */
    unsigned char *sketch_ready;
};

struct vase {
    enum vase_mode mode;
    int window, sinks, kernel, sample, positional, rank, fixed;
    double protect, temperature, rkv_lambda;
    uint64_t seed;
    struct policy_model m;
    struct seq_table seqs;
    struct backend *be;       /* the backend dev and proj belong to */
    float *dev;               /* backend scratch */
    size_t dev_cap;
    float *proj;              /* backend [rank][head_dim] */
    float *hf;                /* host floats */
    size_t hf_cap;
    double *range, *score, *tmp, *gum, *lk, *lv;
    int *l2p, *sel, *used;
    unsigned char *pad;
    int cap;
    float *w_host;            /* [rank * head_dim] */
};

static int vase_create_mode(const struct policy_params *p, const struct policy_model *m,
                            void **self, struct policy_info *info, enum vase_mode mode,
                            struct eb_err *e)
{
    struct vase *s = eb_calloc(1, sizeof *s, e);
    if (!s) return -1;
    s->mode = mode;
    s->m = *m;
    s->window = policy_param_int(p, "window");
    s->sinks = policy_param_int(p, "sinks");
    s->seed = (uint64_t)policy_param_int(p, "seed");
    if (mode == VASE_ATTNV) {
        s->protect = policy_param(p, "protect");
        s->kernel = policy_param_int(p, "kernel");
        s->temperature = policy_param(p, "temperature");
        s->sample = policy_param_int(p, "sample");
        s->positional = policy_param_int(p, "slot_order") == 1;
        s->rkv_lambda = policy_param(p, "rkv_lambda");
        if (s->kernel % 2 == 0) {
            int kernel = s->kernel;
            free(s);
            return eb_fail(e, "kernel=%d: the smoothing kernel must be odd", kernel);
        }
        if (s->rkv_lambda < 1.0 && (s->sample || s->protect > 0)) {
            free(s);
            return eb_fail(e, "rkv_lambda < 1 (attn_rkv) ranks deterministically: it needs "
                              "sample=0 and protect=0");
        }
    } else {
        s->rank = policy_param_int(p, "rank");
        s->fixed = policy_param_int(p, "sketch") == 1;
        s->w_host = eb_malloc((size_t)s->rank * m->head_dim * sizeof *s->w_host, e);
        if (!s->w_host) {
            free(s);
            return -1;
        }
    }
    *info = (struct policy_info){
        .needs = mode == VASE_ATTNV ? POLICY_NEED_RECENT_Q : 0,
        .q_window = mode == VASE_ATTNV ? s->window : 0,
        .window = s->window,
        .schedule = POLICY_EVERY_STEP,
        .slot_slack = s->window, /* the cache peaks at B + W */
    };
    *self = s;
    return 0;
}

static int attnv_create(const struct policy_params *p, const struct policy_model *m, void **self,
                        struct policy_info *info, struct eb_err *e)
{
    return vase_create_mode(p, m, self, info, VASE_ATTNV, e);
}

static int dkv_create(const struct policy_params *p, const struct policy_model *m, void **self,
                      struct policy_info *info, struct eb_err *e)
{
    return vase_create_mode(p, m, self, info, VASE_DKV, e);
}

static void vase_seq_free(void *p)
{
    struct vase_seq *q = p;
    if (!q) return;
    free(q->ord);
    free(q->n_ord);
    free(q->sketch);
    free(q->sketch_ready);
    free(q);
}

static void vase_destroy(void *self)
{
    struct vase *s = self;
    if (!s) return;
    if (s->be) {
        if (s->dev) s->be->free(s->be, s->dev);
        if (s->proj) s->be->free(s->be, s->proj);
    }
    free(s->hf);
    free(s->range);
    free(s->score);
    free(s->tmp);
    free(s->gum);
    free(s->lk);
    free(s->lv);
    free(s->l2p);
    free(s->sel);
    free(s->used);
    free(s->pad);
    free(s->w_host);
    seq_table_free(&s->seqs, vase_seq_free);
    free(s);
}

static struct vase_seq *get_seq(struct vase *s, int seq, struct eb_err *e)
{
    void **slot = seq_table_slot(&s->seqs, seq, e);
    if (!slot) return NULL;
    if (!*slot) *slot = eb_calloc(1, sizeof(struct vase_seq), e);
    return *slot;
}

static int vase_begin(void *self, int seq, const struct seq_view *sv, struct eb_err *e)
{
    (void)sv;
    struct vase *s = self;
    void **slot = seq_table_slot(&s->seqs, seq, e);
    if (!slot) return -1;
    vase_seq_free(*slot);
    *slot = NULL;
    return get_seq(s, seq, e) ? 0 : -1;
}

static void vase_end(void *self, int seq)
{
    struct vase *s = self;
    seq_table_drop(&s->seqs, seq, vase_seq_free);
}

/* Host scratch for heads of len slots, backend scratch of dev_n floats. */
static int reserve(struct vase *s, struct backend *be, int len, size_t dev_n, struct eb_err *e)
{
    if (s->be && s->be != be) {
        if (s->dev) s->be->free(s->be, s->dev);
        if (s->proj) s->be->free(s->be, s->proj);
        s->dev = s->proj = NULL;
        s->dev_cap = 0;
    }
    s->be = be;
    if (dev_n > s->dev_cap) {
        if (s->dev) be->free(be, s->dev);
        s->dev = be->alloc(be, dev_n);
        s->dev_cap = s->dev ? dev_n : 0;
        if (!s->dev) return eb_fail(e, "out of backend memory for %zu scores", dev_n);
    }
    if (s->mode == VASE_DKV && !s->proj) {
        s->proj = be->alloc(be, (size_t)s->rank * s->m.head_dim);
        if (!s->proj) return eb_fail(e, "out of backend memory for the sketch");
    }
    size_t hf_n = dev_n > (size_t)len * s->m.head_dim ? dev_n : (size_t)len * s->m.head_dim;
    if (hf_n > s->hf_cap) {
        float *h = realloc(s->hf, hf_n * sizeof *h);
        if (!h) return eb_fail(e, "out of memory");
        s->hf = h;
        s->hf_cap = hf_n;
    }
    if (len <= s->cap) return 0;
    double **d[] = {&s->range, &s->score, &s->tmp, &s->gum, &s->lk, &s->lv};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
        double *x = realloc(*d[i], (size_t)len * sizeof *x);
        if (!x) return eb_fail(e, "out of memory");
        *d[i] = x;
    }
    int **n[] = {&s->l2p, &s->sel, &s->used};
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++) {
        int *x = realloc(*n[i], (size_t)len * sizeof *x);
        if (!x) return eb_fail(e, "out of memory");
        *n[i] = x;
    }
    unsigned char *pd = realloc(s->pad, (size_t)len);
    if (!pd) return eb_fail(e, "out of memory");
    s->pad = pd;
    s->cap = len;
    return 0;
}

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
static int window_attention(struct vase *s, const struct cache_view *cv, int l, int h, int len,
                            int n_cand, struct eb_err *e)
{
    struct backend *be = cv->be;
    if (!cv->q || cv->n_q < 1) return eb_fail(e, "no recent queries recorded");
    if (!be->window_scores) return eb_fail(e, "the %s backend has no window_scores", be->name);
    int rows = s->window < cv->n_q ? s->window : cv->n_q, group = cv->n_head / cv->n_kv;
    for (int j = 0; j < n_cand; j++) s->score[j] = 0.0;
    for (int g = 0; g < group; g++) {
        /* One query head as its own group of one: n_kv = n_head. */
        struct window_score_args a = {
            .out = s->dev,
            .q = cv->q[l] + (size_t)(cv->n_q - rows) * cv->n_head * cv->head_dim,
            .k = cache_view_k(cv, l, h),
            .n_head = cv->n_head,
            .n_kv = cv->n_head,
            .kv_head = h * group + g,
            .head_dim = cv->head_dim,
            .n_q = rows,
            .len = len,
            .n_cand = n_cand,
            .softmax_all = 0,
            .gqa = SCORE_GQA_MEAN,
            .pad = cache_view_pad(cv, l, h),
            .scale = (float)(1.0 / (sqrt((double)cv->head_dim) * s->temperature)),
        };
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

static int attnv_head(struct vase *s, struct vase_seq *q, const struct cache_view *cv, int seq,
                      int l, int h, int budget, int *keep, struct eb_err *e)
{
    int len = cache_view_len(cv, l, h), n_cand = len - s->window, k = budget - s->window;
    if (value_range(s, cv, l, h, n_cand, e) || window_attention(s, cv, l, h, len, n_cand, e))
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

/* The layer's sketch, transposed to [rank][head_dim], into s->proj. */
static void load_sketch(struct vase *s, struct vase_seq *q, struct backend *be, int seq, int l)
{
    int d = s->m.head_dim, r = s->rank;
    size_t n = (size_t)r * d;
    float *w = s->w_host;
    if (s->fixed && q->sketch && q->sketch_ready[l]) {
        w = q->sketch + (size_t)l * n;
    } else {
        struct evict_rng rng;
        evict_rng_init(&rng, s->seed, seq, l, s->fixed ? 0 : q->evictions, EVICT_STREAM_LAYER);
        double scale = 1.0 / sqrt((double)r);
        for (int i = 0; i < d; i++)       /* G[i][c], row-major, is W[c][i] */
            for (int c = 0; c < r; c++) w[(size_t)c * d + i] = (float)(evict_rng_normal(&rng) * scale);
        if (s->fixed && q->sketch) {
            memcpy(q->sketch + (size_t)l * n, w, n * sizeof *w);
            q->sketch_ready[l] = 1;
        }
    }
    be->upload(be, s->proj, w, n);
}

/* |x_j G|^2 of the rows [0, n) of x into out. */
static void sketch_norms(struct vase *s, struct backend *be, const float *x, int n, double *out)
{
    int r = s->rank;
    be->gemm(be, s->dev, x, s->proj, NULL, n, r, s->m.head_dim);
    be->download(be, s->hf, s->dev, (size_t)n * r);
    for (int j = 0; j < n; j++) {
        double acc = 0.0;
        for (int c = 0; c < r; c++) acc += (double)s->hf[(size_t)j * r + c] * s->hf[(size_t)j * r + c];
        out[j] = acc;
    }
}

static int dkv_head(struct vase *s, const struct cache_view *cv, int l, int h, int budget,
                    int *keep, struct eb_err *e)
{
    int len = cache_view_len(cv, l, h), n_cand = len - s->window, k = budget - s->window;
    sketch_norms(s, cv->be, cache_view_k(cv, l, h), n_cand, s->lk);
    sketch_norms(s, cv->be, cache_view_v(cv, l, h), n_cand, s->lv);
    if (vase_dkv_select(n_cand, s->sinks, k, s->lk, s->lv, cache_view_pad(cv, l, h), s->sel, e))
        return -1;
    int n = 0;
    for (int i = 0; i < k; i++) keep[n++] = s->sel[i];
    for (int i = n_cand; i < len; i++) keep[n++] = i;
    return n;
}

/* The trigger (spec 2.2): more than B slots, a multiple of W.  Also when the
 * head's allocation is full (only a prompt longer than B can get there before
 * the next multiple of W; the original's static cache would be larger). */
static int due(int len, int budget, int w, int capacity)
{
    return len > budget && (len % w == 0 || len >= capacity);
}

/* The released trigger (above) needs B a multiple of the window W, above it. */
static int budget_fits(int budget, int w, struct eb_err *e)
{
    if (budget <= w || budget % w != 0)
        return eb_fail(e, "budget %d must be a multiple of the window %d and larger than it",
                       budget, w);
    return 0;
}

static int vase_check_budget(const struct policy_params *p, int budget, struct eb_err *e)
{
    return budget_fits(budget, policy_param_int(p, "window"), e);
}

/* Not on the shared selector (select.h): the released EvictLayer.update
 * compresses on its own trigger (above), keeps the protected large-range
 * slots before a Gumbel draw without replacement (no single score ranks the
 * keep-set), and leaves the cache in its own slot order, which the next
 * eviction reads back. */
static int vase_select(void *self, int seq, const struct cache_view *cv, int budget,
                       struct keep_set *out, struct eb_err *e)
{
    struct vase *s = self;
    keep_set_none(out);
    if (cv->at_prefill) return 0; /* prefill is never compressed */
    int w = s->window;
    if (budget_fits(budget, w, e)) return -1; /* checked when built; a direct caller too */
    int any = 0;
    for (int i = 0; i < cv->n_layer * cv->n_kv; i++)
        if (due(cv->len[i], budget, w, cv->capacity)) any = 1;
    if (!any) return 0;
    if (!cache_view_has_v(cv)) return eb_fail(e, "the runtime exposes no value rows");
    struct vase_seq *q = get_seq(s, seq, e);
    if (!q) return -1;
    int max_len = 0;
    for (int i = 0; i < cv->n_layer * cv->n_kv; i++)
        if (cv->len[i] > max_len) max_len = cv->len[i];
    size_t dev_n = s->mode == VASE_DKV ? (size_t)max_len * s->rank : (size_t)max_len;
    if (reserve(s, cv->be, max_len, dev_n, e)) return -1;
    if (s->mode == VASE_DKV && s->fixed && !q->sketch) {
        q->sketch = malloc((size_t)cv->n_layer * s->rank * cv->head_dim * sizeof *q->sketch);
        q->sketch_ready = calloc((size_t)cv->n_layer, 1);
        if (!q->sketch || !q->sketch_ready) return eb_fail(e, "out of memory for the sketches");
    }
    if (s->mode == VASE_ATTNV && !s->positional && q->ord_cap < budget) {
        /* (Re)allocated before any head stores its order; a new size forgets
         * the old orders, which then fall back to position order. */
        size_t heads = (size_t)cv->n_layer * cv->n_kv;
        free(q->ord);
        free(q->n_ord);
        q->ord = malloc(heads * (size_t)budget * sizeof *q->ord);
        q->n_ord = calloc(heads, sizeof *q->n_ord);
        q->ord_cap = q->ord && q->n_ord ? budget : 0;
        if (!q->ord_cap) return eb_fail(e, "out of memory for the slot order");
    }
    for (int l = 0; l < cv->n_layer; l++) {
        int sketched = 0;
        for (int h = 0; h < cv->n_kv; h++) {
            int len = cache_view_len(cv, l, h);
            if (!due(len, budget, w, cv->capacity)) continue;
            int *keep = keep_set_head(out, l, h), n;
            if (s->mode == VASE_ATTNV) {
                n = attnv_head(s, q, cv, seq, l, h, budget, keep, e);
            } else {
                if (!sketched) load_sketch(s, q, cv->be, seq, l);
                sketched = 1;
                n = dkv_head(s, cv, l, h, budget, keep, e);
            }
            if (n < 0) return -1;
            out->n_keep[l * cv->n_kv + h] = n;
        }
    }
    q->evictions++;
    return 0;
}

const struct policy_ops vase_attnv_ops = {
    .name = "vase-attnv",
    .create = attnv_create,
    .destroy = vase_destroy,
    .begin_sequence = vase_begin,
    .end_sequence = vase_end,
    .select = vase_select,
    .check_budget = vase_check_budget,
};

const struct policy_ops vase_dkv_ops = {
    .name = "vase-dkv",
    .create = dkv_create,
    .destroy = vase_destroy,
    .begin_sequence = vase_begin,
    .end_sequence = vase_end,
    .select = vase_select,
    .check_budget = vase_check_budget,
};
