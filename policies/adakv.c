/* adakv.c - AdaKV (Feng et al., 2024): head-adaptive budgets over any scorer
 * (wrap.h).  NVIDIA/kvpress @ 8bb29b9c3078452a86d692f29123fa6c793e2b05:
 * kvpress/presses/adakv_press.py (AdaKVPress.compress) under
 * decoding_press.py (DecodingPress, as evaluate_registry.py's
 * decoding_adakv_snapkv).  Per layer, once its k_len tokens exceed B
 * (n_kept = int(k_len * (1 - ratio)) = B): each kv head's top
 * int(n_kept * alpha_safeguard) slots are safe (the window first: kvpress's
 * SnapKV pads it with max + 1), then the n_kv * n_kept best of the layer's
 * slots are kept across heads, so a head keeps more or fewer than B and the
 * layer n_kv * B.  kvpress masks the rest (module.masked_key_indices, a fake
 * key at attention); we evict them, so the next compression ranks the live
 * slots, and the number pruned, n_kv * (k_len - n_kept) with the masked
 * counted, is here the live slots over n_kv * n_kept.  Ties: the lower
 * (kv head, slot) is kept (kvpress's bottom-k leaves them unspecified). */
#include <math.h>
#include <stdlib.h>

#include "policies.h"
#include "wrap.h"

const struct param_def adakv_params[] = {
    {"alpha_safeguard", PARAM_FLOAT, 0.2, 0, 1, NULL,
     "fraction of the budget each kv head keeps by its own ranking"},
    {NULL, PARAM_INT, 0, 0, 0, NULL, NULL},  /* then wrap_params */
};

struct adakv {
    struct wrap w;   /* first: wrap_begin_sequence and wrap_end_sequence take it */
    double alpha;
};

/* Layer l's keep-sets: the head's safe slots and window at +inf, then the
 * n_keep best of the layer's total slots (head-major, so ties keep the lower). */
static int adakv_layer(struct adakv *a, int seq, const struct cache_view *cv, int l, int total,
                       int n_keep, int n_safe, struct keep_set *out, struct eb_err *e)
{
    struct wrap *w = &a->w;
    if (wrap_reserve(w, total, e)) return -1;
    for (int h = 0, off = 0; h < cv->n_kv; off += cache_view_len(cv, l, h++)) {
        int len = cache_view_len(cv, l, h), n_cand = len - w->n_recent, *safe = w->idx;
        double *z = w->z + off;
        if (n_cand < 0) return eb_fail(e, "layer %d kv head %d holds %d slots, under the "
                                          "window of %d", l, h, len, w->n_recent);
        int n_prot = n_safe - w->n_recent < 0 ? 0 : n_safe - w->n_recent;
        n_prot = n_prot < n_cand ? n_prot : n_cand;
        if (wrap_scores(w, seq, cv, l, h, n_cand, z, e) ||
            score_topk(&w->buf, z, n_cand, n_prot, safe, e))
            return -1;
        for (int i = 0; i < n_prot; i++) z[safe[i]] = INFINITY;
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
    /* kvpress's k_len: every token so far stays in its cache */
    double ratio = wrap_target_ratio(cv->next_pos, budget);
    if (ratio == 0) return 0;
    int n_kept = (int)((double)cv->next_pos * (1.0 - ratio)), n_safe = (int)(n_kept * a->alpha);
    for (int l = 0; l < cv->n_layer; l++) {
        int total = 0;
        for (int h = 0; h < cv->n_kv; h++) total += cache_view_len(cv, l, h);
        if (adakv_layer(a, seq, cv, l, total, cv->n_kv * n_kept, n_safe, out, e)) return -1;
    }
    return 0;
}

static void adakv_destroy(void *self)
{
    if (self) wrap_destroy(&((struct adakv *)self)->w);
    free(self);
}

static int adakv_create(const struct policy_params *p, const struct policy_model *m, void **self,
                        struct policy_info *info, struct eb_err *e)
{
    struct adakv *a = *self = eb_calloc(1, sizeof *a, e);
    if (!a) return -1;
    a->alpha = policy_param(p, "alpha_safeguard");
    if (wrap_create(p, m, &a->w, info, e) == 0) return 0;
    adakv_destroy(a);
    *self = NULL;
    return -1;
}

const struct policy_ops adakv_ops = {.name = "adakv", .create = adakv_create,
    .destroy = adakv_destroy, .begin_sequence = wrap_begin_sequence,
    .end_sequence = wrap_end_sequence, .select = adakv_select,
    .shared_params = wrap_params, .window_param = "window"};
