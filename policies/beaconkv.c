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
 * which needs the model's RoPE frequencies (cache_view.rope_inv_freq).
 *
 * This file: the parameters, the instance and the select; the query buffers
 * and observation rows are beacon_buffer.c, FPS and the rotation
 * beacon_fps.c, the attention and keep-set steps attend.c (shared with RPC). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "beaconkv_priv.h"

/* The values of beaconkv_params (param_def.offset). */
struct beaconkv_params {
    int reconstruction;
    int recent;
    int beacons;
    int buf_upper;
    int buf_lower;
    int buffer;
    int softmax;
    int beacon_scope;
    int kernel;
    int budget_counts_prompt;
};

const struct param_def beaconkv_params[] = {
    {"reconstruction", PARAM_CHOICE, 0, 0, 0, "approximate",
     "recorded in every run: the official code was not available (spec 4.3)",
     offsetof(struct beaconkv_params, reconstruction)},
    {"recent", PARAM_INT, 16, 1, 4096, NULL,
     "recent post-RoPE queries in the observation set; the last recent tokens are kept",
     offsetof(struct beaconkv_params, recent)},
    {"beacons", PARAM_INT, 16, 0, 4096, NULL, "FPS beacon queries in the observation set",
     offsetof(struct beaconkv_params, beacons)},
    {"buf_upper", PARAM_INT, 128, 2, 1 << 16, NULL,
     "[guess] query buffer size that triggers continual FPS",
     offsetof(struct beaconkv_params, buf_upper)},
    {"buf_lower", PARAM_INT, 32, 1, 1 << 16, NULL, "[guess] entries continual FPS keeps",
     offsetof(struct beaconkv_params, buf_lower)},
    {"buffer", PARAM_INT, 128, 1, 1 << 20, NULL,
     "[guess] compress when a head holds B + buffer slots, down to B",
     offsetof(struct beaconkv_params, buffer)},
    {"softmax", PARAM_BOOL, 1, 0, 1, NULL,
     "[guess] max over softmax probabilities (0: over raw logits)",
     offsetof(struct beaconkv_params, softmax)},
    {"beacon_scope", PARAM_CHOICE, 0, 0, 1, "group|head",
     "[guess] one buffer per kv group (FPS on the group's concatenated queries) or per query head",
     offsetof(struct beaconkv_params, beacon_scope)},
    {"kernel", PARAM_INT, 1, 1, 63, NULL, "[guess] avg-pool kernel of the scores (odd; 1: none)",
     offsetof(struct beaconkv_params, kernel)},
    {"budget_counts_prompt", PARAM_BOOL, 1, 0, 1, NULL,
     "[guess] B includes the (protected) prompt; 0: B counts generated tokens only",
     offsetof(struct beaconkv_params, budget_counts_prompt)},
    {NULL, PARAM_INT, 0, 0, 0, NULL, NULL, 0},
};

static int beaconkv_create(const struct policy_params *p, const struct policy_model *m,
                           void **self, struct policy_info *info, struct eb_err *e)
{
    const struct beaconkv_params *prm = policy_typed(p);
    int kernel = prm->kernel;
    if (kernel % 2 == 0) return eb_fail(e, "kernel=%d: the pooling kernel must be odd", kernel);
    int upper = prm->buf_upper, lower = prm->buf_lower;
    if (lower >= upper)
        return eb_fail(e, "buf_lower=%d must be below buf_upper=%d", lower, upper);
    struct beaconkv *s = eb_calloc(1, sizeof *s, e);
    if (!s) return -1;
    s->recent = prm->recent;
    s->beacons = prm->beacons;
    s->upper = upper;
    s->lower = lower;
    s->buffer = prm->buffer;
    s->softmax = prm->softmax;
    s->per_head = prm->beacon_scope == 1;
    s->kernel = kernel;
    s->counts_prompt = prm->budget_counts_prompt;
    s->m = *m;
    s->group = m->n_head / m->n_kv;
    s->n_units = s->per_head ? m->n_head : m->n_kv;
    s->unit_dim = s->per_head ? m->head_dim : s->group * m->head_dim;
    int nb = s->beacons > upper ? upper : s->beacons;
    if (attend_scratch_open(&s->w, (size_t)s->recent * m->n_head * m->head_dim,
                            (size_t)(nb + s->recent) * s->group * m->head_dim, e) ||
        !(s->sel = eb_malloc((size_t)upper * sizeof *s->sel, e))) {
        attend_scratch_free(&s->w);
        free(s);
        return -1;
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

static void beaconkv_destroy(void *self)
{
    struct beaconkv *s = self;
    if (!s) return;
    attend_scratch_free(&s->w);
    free(s->sel);
    seq_table_free(&s->seqs, beacon_seq_free);
    free(s);
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
    if (beacon_record_query(s, q, cv, e)) return -1;
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
                cv->be->download(cv->be, s->w.qh, cv->q[l] + (size_t)(cv->n_q - rows) * cv->n_head * d,
                                 (size_t)rows * cv->n_head * d);
                downloaded = l;
            }
            if (attend_scratch_reserve(&s->w, n, e)) return -1;
            int nq = beacon_observation(s, q, cv, l, h, rows, e);
            if (nq < 0) return -1;
            for (int j = 0; j < n; j++) s->w.s[j] = -INFINITY;
            if (attend_reduce(&s->w.ab, cv, l, h, p, n, s->w.rows, nq, s->softmax, ATTEND_MAX, s->w.s, e))
                return -1;
            score_avg_pool_inplace(s->w.s, s->w.tmp, n, s->kernel);
            int k = keep_prompt_topk_recent(&s->w.sb, s->w.s, p, n, keep_n, len,
                                            keep_set_head(out, l, h), e);
            if (k < 0) return -1;
            out->n_keep[l * cv->n_kv + h] = k;
        }
    return 0;
}

/* policy_ops.device_bytes: attend_reduce's query rows and logits for the
 * observation rows of a kv group ((beacons + recent) per query head of the
 * group) against a head's slots. */
static size_t beaconkv_device_bytes(const void *self, const struct policy_model *m, int n_live,
                                    int max_slots)
{
    const struct beaconkv *s = self;
    (void)n_live;
    size_t nq = (size_t)(s->beacons + s->recent) * (size_t)(m->n_head / m->n_kv);
    return backend_alloc_bytes(nq * m->head_dim) + backend_alloc_bytes(nq * max_slots);
}

/* policy_ops.window_of: the slots always kept. */
static int beaconkv_window_of(const void *prm)
{
    return ((const struct beaconkv_params *)prm)->recent;
}

const struct policy_ops beaconkv_ops = {
    .name = "beaconkv",
    .create = beaconkv_create,
    .window_of = beaconkv_window_of,
    .destroy = beaconkv_destroy,
    .begin_sequence = beaconkv_begin,
    .end_sequence = beaconkv_end,
    .select = beaconkv_select,
    .device_bytes = beaconkv_device_bytes,
};
