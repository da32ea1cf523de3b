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
 * (the original scores in bf16).
 *
 * This file: the instance, the trigger and the select; the state is
 * vase_state.c, the modes vase_attnv.c and vase_dkv.c, the rules on host
 * arrays vase_rules.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "evict_rng.h"
#include "vase_priv.h"

static int vase_create_mode(const struct policy_params *p, const struct policy_model *m,
                            void **self, struct policy_info *info, enum vase_mode mode,
                            struct eb_err *e)
{
    struct vase *s = eb_calloc(1, sizeof *s, e);
    if (!s) return -1;
    s->mode = mode;
    s->m = *m;
    if (mode == VASE_ATTNV) {
        const struct vase_attnv_params *prm = policy_typed(p);
        s->window = prm->window;
        s->sinks = prm->sinks;
        s->seed = (uint64_t)prm->seed;
        s->protect = prm->protect;
        s->kernel = prm->kernel;
        s->temperature = prm->temperature;
        s->sample = prm->sample;
        s->positional = prm->slot_order == 1;
        s->rkv_lambda = prm->rkv_lambda;
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
        const struct vase_dkv_params *prm = policy_typed(p);
        s->window = prm->window;
        s->sinks = prm->sinks;
        s->seed = (uint64_t)prm->seed;
        s->rank = prm->rank;
        s->fixed = prm->sketch == 1;
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

static int attnv_check_budget(const struct policy_params *p, int budget, struct eb_err *e)
{
    const struct vase_attnv_params *prm = policy_typed(p);
    return budget_fits(budget, prm->window, e);
}

static int dkv_check_budget(const struct policy_params *p, int budget, struct eb_err *e)
{
    const struct vase_dkv_params *prm = policy_typed(p);
    return budget_fits(budget, prm->window, e);
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
    struct vase_seq *q = vase_get_seq(s, seq, e);
    if (!q) return -1;
    int max_len = 0;
    for (int i = 0; i < cv->n_layer * cv->n_kv; i++)
        if (cv->len[i] > max_len) max_len = cv->len[i];
    size_t dev_n = s->mode == VASE_DKV ? (size_t)max_len * s->rank : (size_t)max_len;
    if (vase_reserve(s, cv->be, max_len, dev_n, e)) return -1;
    if (vase_seq_reserve(s, q, cv, budget, e)) return -1;
    for (int l = 0; l < cv->n_layer; l++) {
        int sketched = 0;
        for (int h = 0; h < cv->n_kv; h++) {
            int len = cache_view_len(cv, l, h);
            if (!due(len, budget, w, cv->capacity)) continue;
            int *keep = keep_set_head(out, l, h), n;
            if (s->mode == VASE_ATTNV) {
                n = vase_attnv_head(s, q, cv, seq, l, h, budget, keep, e);
            } else {
                if (!sketched) vase_load_sketch(s, q, cv->be, seq, l);
                sketched = 1;
                n = vase_dkv_head(s, cv, l, h, budget, keep, e);
            }
            if (n < 0) return -1;
            out->n_keep[l * cv->n_kv + h] = n;
        }
    }
    q->evictions++;
    return 0;
}

/* policy_ops.device_bytes: the scores of a head (a sketch row per slot for
 * DKV) and DKV's sketch [rank][head_dim] (vase_reserve). */
static size_t vase_device_bytes(const void *self, const struct policy_model *m, int n_live,
                                int max_slots)
{
    const struct vase *s = self;
    (void)n_live;
    if (s->mode != VASE_DKV) return backend_alloc_bytes((size_t)max_slots);
    return backend_alloc_bytes((size_t)max_slots * s->rank) +
           backend_alloc_bytes((size_t)s->rank * m->head_dim);
}

const struct policy_ops vase_attnv_ops = {
    .name = "vase-attnv",
    .create = attnv_create,
    .destroy = vase_destroy,
    .begin_sequence = vase_begin,
    .end_sequence = vase_end,
    .select = vase_select,
    .check_budget = attnv_check_budget,
    .device_bytes = vase_device_bytes,
};

const struct policy_ops vase_dkv_ops = {
    .name = "vase-dkv",
    .create = dkv_create,
    .destroy = vase_destroy,
    .begin_sequence = vase_begin,
    .end_sequence = vase_end,
    .select = vase_select,
    .check_budget = dkv_check_budget,
    .device_bytes = vase_device_bytes,
};
