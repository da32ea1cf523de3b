/* expected_attention.c - Expected Attention (kvpress ExpectedAttentionPress):
 * the attention the next n_future_positions queries are expected to pay each
 * key, from the recent queries' mean and covariance.
 * NVIDIA/kvpress @ 8bb29b9c3078452a86d692f29123fa6c793e2b05:
 * kvpress/presses/expected_attention_press.py, utils.py
 * (get_prerope_query_states), scorer_press.py (topk), decoding_press.py
 * (DecodingPress as knorm.c: no compression at the prompt, then every
 * divide_length-th decoding forward compresses to the budget:
 * POLICY_DECODING; its buffer holds the hidden states of the forwards
 * since the last compression, at most hidden_states_buffer_size = 256).
 * Per kv head, over its L slots:
 *   - the queries of those forwards (the recorded post-RoPE rows rotated back
 *     by their positions: kvpress projects the buffered hidden states), the
 *     first n_sink left out; per query head their mean mu and covariance C
 *     (divided by the count);
 *   - R, the RoPE rotation averaged over the positions p .. p +
 *     n_future_positions - 1; mu <- R mu, C <- R C R^T;
 *   - slot j >= n_sink: k.mu / sqrt(d) + k^T C k / (2 d) (use_covariance),
 *     softmax over those slots, the mean over the group's query heads, then
 *     (score + epsilon) |v| (use_vnorm); the sinks score the maximum + 1.
 * k^T C k is (1/m) sum_r (k . R c_r)^2 over the m centred queries c_r, so one
 * backend gemm of the keys against the rows R mu, R c_r of every query head
 * of the group gives both terms (C is never formed).
 * p: the position of the next token.  DecodingPress passes apply_avg_rope
 * the buffer's length as the current position (its q_len), which is the
 * position only at a prefill: compat=released reproduces it.  kvpress pads
 * the sinks with the maximum over the whole batch, here the head's (the same
 * keep-set).  The gemm in f32, the rest in f64; the cache stays in position
 * order (no score depends on the order). */
#include <math.h>
#include <stdlib.h>

#include "policies.h"
#include "select.h"

enum { EA_BUFFER = 256 };   /* DecodingPress's hidden_states_buffer_size */

/* The values of expected_attention_params (param_def.offset). */
struct expected_attention_params {
    int n_future_positions;
    int n_sink;
    int use_covariance;
    int use_vnorm;
    double epsilon;
    int divide_length;
    int compat;
};

const struct param_def expected_attention_params[] = {
    {"n_future_positions", PARAM_INT, 512, 1, 1 << 20, NULL,
     "future positions RoPE is averaged over",
     offsetof(struct expected_attention_params, n_future_positions)},
    {"n_sink", PARAM_INT, 4, 0, 1 << 20, NULL, "first slots kept, first buffered queries left out",
     offsetof(struct expected_attention_params, n_sink)},
    {"use_covariance", PARAM_BOOL, 1, 0, 1, NULL, "the queries' covariance term",
     offsetof(struct expected_attention_params, use_covariance)},
    {"use_vnorm", PARAM_BOOL, 1, 0, 1, NULL, "scores times the value norms",
     offsetof(struct expected_attention_params, use_vnorm)},
    {"epsilon", PARAM_FLOAT, 0, 0, 1, NULL, "added to the scores before the value norms",
     offsetof(struct expected_attention_params, epsilon)},
    {"divide_length", PARAM_INT, 128, 1, 1 << 20, NULL, "compress every this many tokens",
     offsetof(struct expected_attention_params, divide_length)},
    {"compat", PARAM_CHOICE, 0, 0, 1, COMPAT_CHOICES,
     "released: RoPE averaged from the buffer's length on, as DecodingPress runs it",
     offsetof(struct expected_attention_params, compat)},
    {NULL, PARAM_INT, 0, 0, 0, NULL, NULL, 0},
};

struct ea {
    struct selector sel;
    int n_future, n_sink, use_cov, use_vnorm, released, window, hd, group;
    double eps;
    float *qf;              /* [window][group][hd]: the recorded queries */
    double *q, *mu;         /* [window][group][hd] pre-RoPE, [hd] */
    double *cs, *sn;        /* [hd / 2]: the averaged rotation's cosines and sines */
    double rope_p0;         /* ... from this position (-1: none yet), */
    const float *rope_freq; /* ... of these frequencies */
    float *w, *y;           /* host W [group][window + 1][hd], Y [cap][group][window + 1] */
    struct backend *be;     /* of wdev, ydev (the first select's) */
    float *wdev, *ydev;
    int y_cap;              /* slots ydev and y hold */
};

/* The first and second index of RoPE pair i. */
static void pair(int pairing, int i, int hd, int *a, int *b)
{
    *a = pairing == ROPE_PAIR_HALF ? i : 2 * i;
    *b = pairing == ROPE_PAIR_HALF ? i + hd / 2 : 2 * i + 1;
}

/* The group's queries of the last nq forwards, rotated back to pre-RoPE. */
static void load_queries(struct ea *s, const struct cache_view *cv, int layer, int kv_head, int nq)
{
    int hd = s->hd, n = s->group * hd;
    for (int r = 0; r < nq; r++)
        cv->be->download(cv->be, s->qf + (size_t)r * n, cv->q[layer] + ((size_t)(cv->n_q - nq + r) *
                         cv->n_head + (size_t)kv_head * s->group) * hd, (size_t)n);
    for (int r = 0; r < nq; r++) {
        double p = cv->next_pos - nq + r;
        for (int g = 0; g < s->group; g++) {
            const float *x = s->qf + ((size_t)r * s->group + g) * hd;
            double *y = s->q + ((size_t)r * s->group + g) * hd;
            for (int i = 0, a, b; i < hd / 2; i++) {
                pair(cv->rope_pairing, i, hd, &a, &b);
                double ang = p * cv->rope_inv_freq[i], c = cos(ang), sn = sin(ang);
                y[a] = x[a] * c + x[b] * sn;
                y[b] = -x[a] * sn + x[b] * c;
            }
        }
    }
}

/* x[a], x[b] of every RoPE pair through R's 2x2 block [[c, -s], [s, c]], for
 * the n vectors at x + r * stride_v, pair members step apart. */
static void rotate_pairs(const struct ea *s, int pairing, double *x, int n, size_t stride_v,
                         size_t step)
{
    for (int i = 0, a, b; i < s->hd / 2; i++) {
        pair(pairing, i, s->hd, &a, &b);
        for (int r = 0; r < n; r++) {
            double *y = x + r * stride_v, xa = y[a * step], xb = y[b * step];
            y[a * step] = s->cs[i] * xa - s->sn[i] * xb;
            y[b * step] = s->sn[i] * xa + s->cs[i] * xb;
        }
    }
}

/* W's rows for query head g (cols of them, from row g * cols): R mu, then
 * the centred queries R c_r of rows [n_sink, nq). */
static void head_rows(struct ea *s, int pairing, int g, int nq, int cols)
{
    int hd = s->hd, m = nq - s->n_sink;
    double *mu = s->mu, *c = s->q;   /* the rows are centred in place */
    for (int i = 0; i < hd; i++) mu[i] = 0.0;
    for (int r = s->n_sink; r < nq; r++)
        for (int i = 0; i < hd; i++) mu[i] += s->q[((size_t)r * s->group + g) * hd + i] / m;
    for (int r = s->n_sink; r < nq; r++)
        for (int i = 0; i < hd; i++) c[((size_t)r * s->group + g) * hd + i] -= mu[i];
    rotate_pairs(s, pairing, mu, 1, 0, 1);
    float *w = s->w + (size_t)g * cols * hd;
    for (int i = 0; i < hd; i++) w[i] = (float)mu[i];
    for (int r = 0; r + 1 < cols; r++) {
        double *x = c + ((size_t)(s->n_sink + r) * s->group + g) * hd;
        rotate_pairs(s, pairing, x, 1, 0, 1);
        for (int i = 0; i < hd; i++) w[(size_t)(r + 1) * hd + i] = (float)x[i];
    }
}

/* R: RoPE's rotation averaged over positions p0 .. p0 + n_future - 1, as
 * the mean cosine and sine of every pair. */
static void avg_rope(struct ea *s, const struct cache_view *cv, double p0)
{
    if (p0 == s->rope_p0 && cv->rope_inv_freq == s->rope_freq) return;   /* a select's heads */
    s->rope_p0 = p0;
    s->rope_freq = cv->rope_inv_freq;
    for (int i = 0; i < s->hd / 2; i++) {
        s->cs[i] = s->sn[i] = 0.0;
        for (int t = 0; t < s->n_future; t++) {
            s->cs[i] += cos((p0 + t) * cv->rope_inv_freq[i]) / s->n_future;
            s->sn[i] += sin((p0 + t) * cv->rope_inv_freq[i]) / s->n_future;
        }
    }
}

/* z[j] += the softmax over the slots [n_sink, L) of query head g's expected
 * logits / group, from Y's columns [g * cols, (g + 1) * cols). */
static void head_scores(struct ea *s, int g, int L, int cols, int nq, double *w, double *z)
{
    int hd = s->hd, S = s->n_sink, stride = s->group * cols;
    double top = -INFINITY, sum = 0.0;
    for (int j = S; j < L; j++) {
        const float *y = s->y + (size_t)(j - S) * stride + (size_t)g * cols;
        double quad = 0.0;
        for (int r = 1; r < cols; r++) quad += (double)y[r] * y[r];
        w[j] = y[0] / sqrt((double)hd) + quad / (nq - S) / hd / 2;
        top = fmax(top, w[j]);
    }
    for (int j = S; j < L; j++) sum += w[j] = exp(w[j] - top);
    for (int j = S; j < L; j++) z[j] += w[j] / sum / s->group;
}

/* The backend rows of W and Y (Y for cap slots), on the first select's backend. */
static int reserve_dev(struct ea *s, struct backend *be, int cap, struct eb_err *e)
{
    size_t cols = (size_t)s->group * (s->window + 1);
    if (!s->be) {
        s->be = be;
        if (!(s->wdev = be->alloc(be, cols * s->hd)))
            return eb_fail(e, "out of backend memory for %zu query rows", cols);
    }
    if (be != s->be) return eb_fail(e, "one instance on two backends");
    if (cap <= s->y_cap) return 0;
    if (s->ydev) be->free(be, s->ydev);
    float *y = realloc(s->y, (size_t)cap * cols * sizeof *y);
    if (y) s->y = y;
    s->ydev = be->alloc(be, (size_t)cap * cols);
    if (!y || !s->ydev) return eb_fail(e, "out of memory for %d x %zu expected logits", cap, cols);
    s->y_cap = cap;
    return 0;
}

static int ea_score(void *self, int seq, const struct cache_view *cv, int layer, int kv_head,
                    int n_cand, double *z, struct eb_err *e)
{
    (void)seq;
    struct ea *s = self;
    int L = n_cand, S = s->n_sink, hd = s->hd;
    int nq = cv->n_q < s->window ? cv->n_q : s->window, cols = s->use_cov ? nq - S + 1 : 1;
    if (cv->head_dim != hd || cv->n_head / cv->n_kv != s->group)
        return eb_fail(e, "the cache's shape is not the model's");
    if (!cv->q || !cv->rope_inv_freq || nq <= S || L <= S)
        return eb_fail(e, "%d queries recorded, %d slots (need more than n_sink = %d of each) "
                          "and the model's RoPE", nq, L, S);
    const float *k, *v, *kdev = cache_view_k(cv, layer, kv_head);
    if (score_host_kv(&s->sel.buf, cv, layer, kv_head, L, &k, s->use_vnorm ? &v : NULL, e) ||
        reserve_dev(s, cv->be, cv->capacity, e))
        return -1;
    load_queries(s, cv, layer, kv_head, nq);
    avg_rope(s, cv, s->released ? nq : cv->next_pos);
    for (int g = 0; g < s->group; g++) head_rows(s, cv->rope_pairing, g, nq, cols);
    size_t n_rows = (size_t)s->group * cols;
    cv->be->upload(cv->be, s->wdev, s->w, n_rows * hd);
    cv->be->gemm(cv->be, s->ydev, kdev + (size_t)S * hd, s->wdev, NULL, L - S, (int)n_rows, hd);
    cv->be->download(cv->be, s->y, s->ydev, (size_t)(L - S) * n_rows);
    for (int j = 0; j < L; j++) z[j] = 0.0;
    for (int g = 0; g < s->group; g++) head_scores(s, g, L, cols, nq, s->sel.buf.work, z);
    double top = -INFINITY;
    for (int j = S; j < L; j++) {
        if (s->use_vnorm) {
            double n2 = 0.0;
            const float *x = v + (size_t)j * hd;
            for (int i = 0; i < hd; i++) n2 += (double)x[i] * x[i];
            z[j] = (z[j] + s->eps) * sqrt(n2);
        }
        top = fmax(top, z[j]);
    }
    for (int j = 0; j < S; j++) z[j] = top + 1;
    return 0;
}

static void ea_destroy(void *self)
{
    struct ea *s = self;
    if (!s) return;
    selector_free(&s->sel);
    if (s->wdev) s->be->free(s->be, s->wdev);
    if (s->ydev) s->be->free(s->be, s->ydev);
    free(s->qf);
    free(s->q);
    free(s->mu);
    free(s->cs);
    free(s->sn);
    free(s->w);
    free(s->y);
    free(s);
}

static const struct scorer ea_scorer = {.score = ea_score, .order = KEEP_BY_POSITION,
    .use_pads = 1, .pads = PAD_EVICT_FIRST, .pad_score = PAD_SCORE_H2O};

static int ea_create(const struct policy_params *p, const struct policy_model *m, void **self,
                     struct policy_info *info, struct eb_err *e)
{
    const struct expected_attention_params *prm = policy_typed(p);
    struct ea *s = *self = eb_calloc(1, sizeof *s, e);
    if (!s) return -1;
    int divide = prm->divide_length, hd = m->head_dim;
    *s = (struct ea){.n_future = prm->n_future_positions, .n_sink = prm->n_sink,
        .use_cov = prm->use_covariance, .use_vnorm = prm->use_vnorm, .eps = prm->epsilon,
        .released = prm->compat == 1, .hd = hd,
        .window = divide < EA_BUFFER ? divide : EA_BUFFER, .group = m->n_head / m->n_kv,
        .rope_p0 = -1};
    size_t nq = (size_t)s->window * s->group * hd;
    s->qf = malloc(nq * sizeof *s->qf);
    s->q = malloc(nq * sizeof *s->q);
    s->mu = malloc((size_t)hd * sizeof *s->mu);
    s->w = malloc((size_t)s->group * (s->window + 1) * hd * sizeof *s->w);
    s->cs = malloc((size_t)hd * sizeof *s->cs);
    s->sn = malloc((size_t)hd * sizeof *s->sn);
    if (!s->qf || !s->q || !s->mu || !s->w || !s->cs || !s->sn) {
        ea_destroy(s);
        return eb_fail(e, "out of memory for the query statistics");
    }
    *info = (struct policy_info){.needs = POLICY_NEED_RECENT_Q, .q_window = s->window,
        .schedule = POLICY_DECODING, .divide_length = divide};
    return 0;
}

/* policy_ops.device_bytes: W and Y (reserve_dev). */
static size_t ea_device_bytes(const void *self, const struct policy_model *m, int n_live,
                              int max_slots)
{
    const struct ea *s = self;
    (void)n_live;
    size_t cols = (size_t)s->group * (s->window + 1);
    return backend_alloc_bytes(cols * m->head_dim) + backend_alloc_bytes((size_t)max_slots * cols);
}

static int ea_select(void *self, int seq, const struct cache_view *cv, int budget,
                     struct keep_set *out, struct eb_err *e)
{
    struct ea *s = self;
    return select_by_score(&ea_scorer, s, &s->sel, seq, cv, budget, 0, out, e);
}

const struct policy_ops expected_attention_ops = {.name = "expected-attention",
    .create = ea_create, .destroy = ea_destroy, .select = ea_select,
    .device_bytes = ea_device_bytes};
