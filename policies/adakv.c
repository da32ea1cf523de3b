/* adakv.c - AdaKV (Feng et al., 2024): head-adaptive budgets over a scorer
 * (wrap.h), as NVIDIA/kvpress @ 8bb29b9c3078452a86d692f29123fa6c793e2b05
 * kvpress/presses/adakv_press.py under decoding_press.py: per layer, once the
 * k_len tokens exceed B, each kv head's top int(B * alpha_safeguard) slots are
 * safe (its window first), then the layer's n_kv * B best slots are kept
 * across its heads, ties to the lower (kv head, slot).  kvpress masks the
 * others; we evict them (policies/README.md). */
#include <math.h>

#include "policies.h"
#include "wrap.h"

/* The values of adakv_params (param_def.offset). */
struct adakv_params {
    struct wrap_params wrap;   /* first: wrap_params's offsets */
    double alpha_safeguard;
};

const struct param_def adakv_params[] = {
    {"alpha_safeguard", PARAM_FLOAT, 0.2, 0, 1, NULL,
     "fraction of the budget each kv head keeps by its own ranking",
     offsetof(struct adakv_params, alpha_safeguard)},
    {NULL, PARAM_INT, 0, 0, 0, NULL, NULL, 0},  /* then wrap_params */
};

struct adakv {
    struct wrap w;   /* first: wrap_policy_new and the wrap_* vtable entries take it */
    double alpha;
};

/* Layer l's keep-sets: each head's safe slots and window at +inf, then the
 * n_keep best of the layer's slots (head-major, so ties keep the lower). */
static int adakv_layer(struct wrap *w, int seq, const struct cache_view *cv, int l, int n_keep,
                       int n_safe, struct keep_set *out, struct eb_err *e)
{
    int total = 0, n_prot = n_safe > w->n_recent ? n_safe - w->n_recent : 0;
    for (int h = 0; h < cv->n_kv; h++) total += cache_view_len(cv, l, h);
    if (wrap_reserve(w, total, e)) return -1;
    for (int h = 0, off = 0; h < cv->n_kv; off += cache_view_len(cv, l, h++)) {
        int len = cache_view_len(cv, l, h), n_cand = len - w->n_recent;
        int n_safe_cand = n_prot < n_cand ? n_prot : n_cand;
        double *z = w->z + off;
        if (n_cand < 0) return eb_fail(e, "layer %d kv head %d: %d slots", l, h, len);
        if (wrap_scores(w, seq, cv, l, h, n_cand, z, e) ||
            score_topk(&w->buf, z, n_cand, n_safe_cand, w->idx, e))
            return -1;
        for (int i = 0; i < n_safe_cand; i++) z[w->idx[i]] = INFINITY;
        for (int j = n_cand; j < len; j++) z[j] = INFINITY;
    }
    n_keep = n_keep < total ? n_keep : total;
    if (score_topk(&w->buf, w->z, total, n_keep, w->idx, e)) return -1;
    for (int h = 0, off = 0, i = 0; h < cv->n_kv; off += cache_view_len(cv, l, h++)) {
        int *keep = keep_set_head(out, l, h), n = 0, end = off + cache_view_len(cv, l, h);
        for (; i < n_keep && w->idx[i] < end; i++) keep[n++] = w->idx[i] - off;
        out->n_keep[l * cv->n_kv + h] = n;
        wrap_kept(w, seq, l, h, keep, n);
    }
    return 0;
}

static int adakv_select(void *self, int seq, const struct cache_view *cv, int budget,
                        struct keep_set *out, struct eb_err *e)
{
    struct adakv *a = self;
    keep_set_none(out);
    /* kvpress's k_len: its cache holds every token so far */
    double ratio = wrap_target_ratio(cv->next_pos, budget);
    if (ratio == 0) return 0;
    int n_kept = (int)((double)cv->next_pos * (1.0 - ratio)), n_safe = (int)(n_kept * a->alpha);
    for (int l = 0; l < cv->n_layer; l++)
        if (adakv_layer(&a->w, seq, cv, l, cv->n_kv * n_kept, n_safe, out, e)) return -1;
    return 0;
}

static int adakv_create(const struct policy_params *p, const struct policy_model *m, void **self,
                        struct policy_info *info, struct eb_err *e)
{
    const struct adakv_params *prm = policy_typed(p);
    struct adakv *a = *self = wrap_policy_new(sizeof *a, &prm->wrap, m, info, e);
    if (!a) return -1;
    a->alpha = prm->alpha_safeguard;
    return 0;
}

const struct policy_ops adakv_ops = {.name = "adakv", .create = adakv_create,
    .destroy = wrap_policy_free, .begin_sequence = wrap_begin_sequence,
    .end_sequence = wrap_end_sequence, .select = adakv_select,
    .shared_params = wrap_params, .window_of = wrap_window_of};
