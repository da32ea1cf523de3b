/* beaconkv.c - BeaconKV, an APPROXIMATE RECONSTRUCTION
 * (../shared/specs/vase_beaconkv.md §4.3: the paper body and the official
 * code were not available; every unknown is a parameter whose default is
 * the spec's best guess):
 *
 *   per (layer, unit) - unit = a kv head's group (beacon_scope=group) or a
 *   query head (beacon_scope=head) - a buffer of past pre-RoPE decode
 *   queries, thinned by farthest point sampling with cosine distance from
 *   buf_upper down to buf_lower entries whenever it fills ("continual FPS");
 *
 *   when a head holds B + buffer slots (B counts the prompt unless
 *   budget_counts_prompt=0), the observation set is `beacons` FPS
 *   representatives of the buffer rotated to the current position plus the
 *   `recent` latest post-RoPE queries; each scores the evictable keys
 *   (generated, not among the last `recent`) by its softmax over them
 *   (softmax=0: raw logits), aggregated by the MAX over queries and over the
 *   group's heads, optionally avg-pooled, and the top B - prompt - recent are
 *   kept in position order with the prompt and the recent tokens.
 *
 * The runtime records post-RoPE queries; the pre-RoPE query (after Qwen3's
 * q_norm) is recovered exactly by rotating back by the query's own position,
 * which needs the model's RoPE frequencies (cache_view.rope_inv_freq). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "beaconkv.h"
#include "policies.h"
#include "rpc.h"
#include "score.h"

const struct param_def beaconkv_params[] = {
    {"reconstruction", PARAM_CHOICE, 0, 0, 0, "approximate",
     "recorded in every run: the official code was not available (spec 4.3)"},
    {"recent", PARAM_INT, 16, 1, 4096, NULL,
     "recent post-RoPE queries in the observation set; the last recent tokens are kept"},
    {"beacons", PARAM_INT, 16, 0, 4096, NULL, "FPS beacon queries in the observation set"},
    {"buf_upper", PARAM_INT, 128, 2, 1 << 16, NULL,
     "[guess] query buffer size that triggers continual FPS"},
    {"buf_lower", PARAM_INT, 32, 1, 1 << 16, NULL, "[guess] entries continual FPS keeps"},
    {"buffer", PARAM_INT, 128, 1, 1 << 20, NULL,
     "[guess] compress when a head holds B + buffer slots, down to B"},
    {"softmax", PARAM_BOOL, 1, 0, 1, NULL,
     "[guess] max over softmax probabilities (0: over raw logits)"},
    {"beacon_scope", PARAM_CHOICE, 0, 0, 1, "group|head",
     "[guess] one buffer per kv group (FPS on the group's concatenated queries) or per query head"},
    {"kernel", PARAM_INT, 1, 1, 63, NULL, "[guess] avg-pool kernel of the scores (odd; 1: none)"},
    {"budget_counts_prompt", PARAM_BOOL, 1, 0, 1, NULL,
     "[guess] B includes the (protected) prompt; 0: B counts generated tokens only"},
    {NULL, PARAM_INT, 0, 0, 0, NULL, NULL},
};

/* ---- farthest point sampling (beaconkv.h) ---- */

int beacon_fps(const float *x, int n, int dim, int m, int *out, struct eb_err *e)
{
    if (n < 0 || m < 0 || m > n || dim < 1) return eb_fail(e, "fps: %d of %d points", m, n);
    if (m == 0) return 0;
    double *u = malloc((size_t)n * dim * sizeof *u), *mind = malloc((size_t)n * sizeof *mind);
    unsigned char *taken = calloc((size_t)n, 1);
    if (!u || !mind || !taken) {
        free(u);
        free(mind);
        free(taken);
        return eb_fail(e, "fps: out of memory for %d points", n);
    }
    for (int i = 0; i < n; i++) {
        double ss = 0.0;
        for (int c = 0; c < dim; c++) ss += (double)x[(size_t)i * dim + c] * x[(size_t)i * dim + c];
        double inv = ss > 0 ? 1.0 / sqrt(ss) : 0.0;
        for (int c = 0; c < dim; c++) u[(size_t)i * dim + c] = x[(size_t)i * dim + c] * inv;
        mind[i] = INFINITY;
    }
    int cur = 0; /* the seed point: the oldest query */
    for (int t = 0; t < m; t++) {
        out[t] = cur;
        taken[cur] = 1;
        const double *a = u + (size_t)cur * dim;
        int best = -1;
        for (int i = 0; i < n; i++) {
            if (taken[i]) continue;
            double dot = 0.0;
            const double *b = u + (size_t)i * dim;
            for (int c = 0; c < dim; c++) dot += a[c] * b[c];
            double dist = 1.0 - dot;
            if (dist < mind[i]) mind[i] = dist;
            if (best < 0 || mind[i] > mind[best]) best = i;
        }
        cur = best;
    }
    free(u);
    free(mind);
    free(taken);
    return 0;
}

void beacon_rotate(float *x, int head_dim, int pos, const float *inv_freq, int pairing,
                   int inverse)
{
    int half = head_dim / 2;
    float p = (float)pos;
    for (int i = 0; i < half; i++) {
        float angle = p * inv_freq[i];
        float c = cosf(angle), s = inverse ? -sinf(angle) : sinf(angle);
        int a = pairing == ROPE_PAIR_HALF ? i : 2 * i, b = pairing == ROPE_PAIR_HALF ? i + half : 2 * i + 1;
        float x0 = x[a], x1 = x[b];
        x[a] = x0 * c - x1 * s;
        x[b] = x0 * s + x1 * c;
    }
}

/* ---- the policy ---- */

struct beacon_seq {
    int n_prompt;
    int last_pos;         /* position of the newest buffered query; -1: none */
    float *buf;           /* [n_layer * n_units][buf_upper][unit_dim] pre-RoPE queries */
    int *count;           /* [n_layer * n_units] */
};

struct beaconkv {
    int recent, beacons, upper, lower, buffer, softmax, per_head, kernel, counts_prompt;
    int n_units, unit_dim, group;
    struct policy_model m;
    struct seq_table seqs;
    struct attend_buf ab;
    struct score_buf sb;
    float *qh;            /* host [recent][n_head * head_dim] */
    float *rows;          /* host observation rows [(beacons + recent) * group][head_dim] */
    float *tmpbuf;        /* host [buf_upper][unit_dim] */
    int *sel;
    double *s, *tmp;
    int s_cap;
};

static int beaconkv_create(const struct policy_params *p, const struct policy_model *m,
                           void **self, struct policy_info *info, struct eb_err *e)
{
    int kernel = policy_param_int(p, "kernel");
    if (kernel % 2 == 0) return eb_fail(e, "kernel=%d: the pooling kernel must be odd", kernel);
    int upper = policy_param_int(p, "buf_upper"), lower = policy_param_int(p, "buf_lower");
    if (lower >= upper)
        return eb_fail(e, "buf_lower=%d must be below buf_upper=%d", lower, upper);
    struct beaconkv *s = eb_calloc(1, sizeof *s, e);
    if (!s) return -1;
    s->recent = policy_param_int(p, "recent");
    s->beacons = policy_param_int(p, "beacons");
    s->upper = upper;
    s->lower = lower;
    s->buffer = policy_param_int(p, "buffer");
    s->softmax = policy_param_int(p, "softmax");
    s->per_head = policy_param_int(p, "beacon_scope") == 1;
    s->kernel = kernel;
    s->counts_prompt = policy_param_int(p, "budget_counts_prompt");
    s->m = *m;
    s->group = m->n_head / m->n_kv;
    s->n_units = s->per_head ? m->n_head : m->n_kv;
    s->unit_dim = s->per_head ? m->head_dim : s->group * m->head_dim;
    int nb = s->beacons > upper ? upper : s->beacons;
    s->qh = malloc((size_t)s->recent * m->n_head * m->head_dim * sizeof *s->qh);
    s->rows = malloc((size_t)(nb + s->recent) * s->group * m->head_dim * sizeof *s->rows);
    s->tmpbuf = malloc((size_t)upper * s->unit_dim * sizeof *s->tmpbuf);
    s->sel = malloc((size_t)upper * sizeof *s->sel);
    if (!s->qh || !s->rows || !s->tmpbuf || !s->sel) {
        free(s->qh);
        free(s->rows);
        free(s->tmpbuf);
        free(s->sel);
        free(s);
        return eb_fail(e, "out of memory");
    }
    *info = (struct policy_info){
        .needs = POLICY_NEED_RECENT_Q,
        .q_window = s->recent,
        .window = s->recent,
        .schedule = POLICY_EVERY_STEP,
        /* B + buffer at the peak; a budget that excludes the prompt has no bound
         * the runtime can know before the prompt */
        .slot_slack = s->counts_prompt ? s->buffer : -1,
        .notice = "beaconkv is an APPROXIMATE reconstruction (its paper body and code were not "
                  "available; defaults marked [guess] in its parameters are the spec's best "
                  "guesses, see specs/vase_beaconkv.md 4.3)",
    };
    *self = s;
    return 0;
}

static void beacon_seq_free(void *p)
{
    struct beacon_seq *q = p;
    if (!q) return;
    free(q->buf);
    free(q->count);
    free(q);
}

static void beaconkv_destroy(void *self)
{
    struct beaconkv *s = self;
    if (!s) return;
    attend_buf_free(&s->ab);
    score_buf_free(&s->sb);
    free(s->qh);
    free(s->rows);
    free(s->tmpbuf);
    free(s->sel);
    free(s->s);
    free(s->tmp);
    seq_table_free(&s->seqs, beacon_seq_free);
    free(s);
}

static int beaconkv_begin(void *self, int seq, const struct seq_view *sv, struct eb_err *e)
{
    struct beaconkv *s = self;
    void **slot = seq_table_slot(&s->seqs, seq, e);
    if (!slot) return -1;
    beacon_seq_free(*slot);
    struct beacon_seq *q = *slot = eb_calloc(1, sizeof *q, e);
    if (!q) return -1;
    q->n_prompt = sv->n_prompt;
    q->last_pos = -1;
    size_t units = (size_t)s->m.n_layer * s->n_units;
    q->buf = malloc(units * s->upper * s->unit_dim * sizeof *q->buf);
    q->count = calloc(units, sizeof *q->count);
    if (!q->buf || !q->count) return eb_fail(e, "out of memory for the query buffers");
    return 0;
}

static void beaconkv_end(void *self, int seq)
{
    struct beaconkv *s = self;
    seq_table_drop(&s->seqs, seq, beacon_seq_free);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Continual FPS: keep buf_lower diverse entries, in their original order. */
static int thin(struct beaconkv *s, float *buf, int *count, struct eb_err *e)
{
    if (beacon_fps(buf, *count, s->unit_dim, s->lower, s->sel, e)) return -1;
    qsort(s->sel, (size_t)s->lower, sizeof *s->sel, cmp_int);
    for (int i = 0; i < s->lower; i++) /* sel ascends, so sel[i] >= i: no overlap issue */
        memmove(buf + (size_t)i * s->unit_dim, buf + (size_t)s->sel[i] * s->unit_dim,
                (size_t)s->unit_dim * sizeof *buf);
    *count = s->lower;
    return 0;
}

/* Append the newest query of every layer (position next_pos - 1), pre-RoPE. */
static int record_query(struct beaconkv *s, struct beacon_seq *q, const struct cache_view *cv,
                        struct eb_err *e)
{
    int d = cv->head_dim, pos = cv->next_pos - 1, H = cv->n_head;
    if (pos <= q->last_pos || !cv->q || cv->n_q < 1) return 0;
    if (!cv->rope_inv_freq)
        return eb_fail(e, "needs the model's RoPE frequencies to recover pre-RoPE queries");
    q->last_pos = pos;
    for (int l = 0; l < cv->n_layer; l++) {
        cv->be->download(cv->be, s->qh, cv->q[l] + (size_t)(cv->n_q - 1) * H * d, (size_t)H * d);
        for (int g = 0; g < H; g++) beacon_rotate(s->qh + (size_t)g * d, d, pos, cv->rope_inv_freq, cv->rope_pairing, 1);
        for (int u = 0; u < s->n_units; u++) {
            int unit = l * s->n_units + u;
            float *buf = q->buf + (size_t)unit * s->upper * s->unit_dim;
            /* group scope: the unit's G heads are contiguous in the row */
            memcpy(buf + (size_t)q->count[unit]++ * s->unit_dim, s->qh + (size_t)u * s->unit_dim,
                   (size_t)s->unit_dim * sizeof *buf);
            if (q->count[unit] >= s->upper && thin(s, buf, &q->count[unit], e)) return -1;
        }
    }
    return 0;
}

/* Observation rows of kv head h into s->rows ([n][head_dim]); returns n. */
static int observation(struct beaconkv *s, struct beacon_seq *q, const struct cache_view *cv,
                       int l, int h, int rows, struct eb_err *e)
{
    int d = cv->head_dim, n = 0, G = s->group;
    int units = s->per_head ? G : 1;
    for (int uu = 0; uu < units; uu++) {
        int u = s->per_head ? h * G + uu : h, unit = l * s->n_units + u;
        const float *buf = q->buf + (size_t)unit * s->upper * s->unit_dim;
        int cnt = q->count[unit], nb = s->beacons < cnt ? s->beacons : cnt;
        if (beacon_fps(buf, cnt, s->unit_dim, nb, s->sel, e)) return -1;
        for (int b = 0; b < nb; b++) {
            const float *src = buf + (size_t)s->sel[b] * s->unit_dim;
            int heads = s->per_head ? 1 : G;
            for (int g = 0; g < heads; g++) {
                float *dst = s->rows + (size_t)n++ * d;
                memcpy(dst, src + (size_t)g * d, (size_t)d * sizeof *dst);
                beacon_rotate(dst, d, cv->next_pos - 1, cv->rope_inv_freq, cv->rope_pairing, 0);
            }
        }
    }
    return n + group_query_rows(s->rows + (size_t)n * d, s->qh, rows, cv->n_head, d, h, G);
}

/* Not on the shared selector (select.h): like RPC it protects the prompt
 * and scores only the generated middle, with its own trigger and budget
 * accounting (spec §4), and shares RPC's keep-set builder. */
static int beaconkv_select(void *self, int seq, const struct cache_view *cv, int budget,
                           struct keep_set *out, struct eb_err *e)
{
    struct beaconkv *s = self;
    keep_set_none(out);
    struct beacon_seq *q = seq_table_get(&s->seqs, seq);
    if (!q) return eb_fail(e, "sequence %d was not begun", seq);
    if (cv->at_prefill) return 0; /* decode queries only */
    if (record_query(s, q, cv, e)) return -1;
    int R = s->recent, d = cv->head_dim, rows = cv->n_q < R ? cv->n_q : R;
    int downloaded = -1;
    for (int l = 0; l < cv->n_layer; l++)
        for (int h = 0; h < cv->n_kv; h++) {
            int len = cache_view_len(cv, l, h), p = prompt_slots(cv, l, h, q->n_prompt);
            int target = s->counts_prompt ? budget : p + budget;
            if (len < target + s->buffer && len < cv->capacity) continue;
            int n = len - p - R, keep_n = target - p - R;
            if (keep_n < 0) keep_n = 0;
            if (n <= keep_n) continue;
            if (downloaded != l) {
                cv->be->download(cv->be, s->qh, cv->q[l] + (size_t)(cv->n_q - rows) * cv->n_head * d,
                                 (size_t)rows * cv->n_head * d);
                downloaded = l;
            }
            if (n > s->s_cap) {
                double *a = realloc(s->s, (size_t)n * sizeof *a);
                if (a) s->s = a;
                double *b = a ? realloc(s->tmp, (size_t)n * sizeof *b) : NULL;
                if (b) s->tmp = b;
                if (!a || !b) return eb_fail(e, "out of memory");
                s->s_cap = n;
            }
            int nq = observation(s, q, cv, l, h, rows, e);
            if (nq < 0) return -1;
            for (int j = 0; j < n; j++) s->s[j] = -INFINITY;
            if (attend_reduce(&s->ab, cv, l, h, p, n, s->rows, nq, s->softmax, ATTEND_MAX, s->s, e))
                return -1;
            score_avg_pool_inplace(s->s, s->tmp, n, s->kernel);
            int k = keep_prompt_topk_recent(&s->sb, s->s, p, n, keep_n, len,
                                            keep_set_head(out, l, h), e);
            if (k < 0) return -1;
            out->n_keep[l * cv->n_kv + h] = k;
        }
    return 0;
}

const struct policy_ops beaconkv_ops = {
    .name = "beaconkv",
    .create = beaconkv_create,
    .destroy = beaconkv_destroy,
    .begin_sequence = beaconkv_begin,
    .end_sequence = beaconkv_end,
    .select = beaconkv_select,
};
