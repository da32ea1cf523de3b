/* pyramidkv.c - PyramidKV (Cai et al., 2024): per-layer budgets over a scorer
 * (wrap.h), as NVIDIA/kvpress @ 8bb29b9c3078452a86d692f29123fa6c793e2b05
 * kvpress/presses/pyramidkv_press.py under decoding_press.py: a layer of
 * k_len > B slots a head keeps its pyramid budget a head, from its own k_len
 * in kvpress's floats: topk(budget - window) plus the window, by position. */
#include <math.h>

#include "policies.h"
#include "wrap.h"

/* The values of pyramidkv_params (param_def.offset). */
struct pyramidkv_params {
    struct wrap_params wrap;   /* first: wrap_params's offsets */
    int beta;
};

const struct param_def pyramidkv_params[] = {
    {"beta", PARAM_INT, 20, 1, 1 << 20, NULL, "steepness: the top layer keeps 1/beta of the mean",
     offsetof(struct pyramidkv_params, beta)},
    {NULL, PARAM_INT, 0, 0, 0, NULL, NULL, 0},  /* then wrap_params */
};

struct pyramidkv {
    struct wrap w;   /* first: wrap_policy_new and the wrap_* vtable entries take it */
    int beta, n_layer;
};

/* pyramidkv_press.py get_layer_budget; Python's round() is rint's ties to even. */
static int layer_budget(const struct pyramidkv *s, int layer, int q_len, double ratio)
{
    double window = s->w.n_recent, cap = window + q_len * (1.0 - ratio);
    double min_num = (cap - window) / s->beta, max_num = (cap - window) * 2 - min_num;
    if (max_num >= q_len - window) {
        max_num = q_len - window;
        min_num = (cap - window) * 2 - max_num;
    }
    if (!(q_len >= max_num && max_num >= min_num && min_num >= window) || s->n_layer < 2)
        return (int)rint(q_len * (1.0 - ratio));
    double steps = (max_num - min_num) / (s->n_layer - 1);
    return (int)rint(max_num - layer * steps);
}

static int pyramidkv_select(void *self, int seq, const struct cache_view *cv, int budget,
                            struct keep_set *out, struct eb_err *e)
{
    struct pyramidkv *s = self;
    struct wrap *w = &s->w;
    keep_set_none(out);
    for (int l = 0; l < cv->n_layer; l++) {
        int len = cache_view_len(cv, l, 0), n_cand = len - w->n_recent;
        double ratio = wrap_target_ratio(len, budget);
        if (ratio == 0) continue;
        int n_kept = layer_budget(s, l, len, ratio);
        n_kept = n_kept < len ? n_kept : len;
        if (n_kept < w->n_recent)
            return eb_fail(e, "layer %d: budget %d under the window of %d", l, n_kept, w->n_recent);
        if (wrap_reserve(w, len, e)) return -1;
        for (int h = 0; h < cv->n_kv; h++) {
            int *keep = keep_set_head(out, l, h), n;
            if (cache_view_len(cv, l, h) != len)
                return eb_fail(e, "layer %d: kv heads hold different lengths", l);
            if (wrap_scores(w, seq, cv, l, h, n_cand, w->z, e) ||
                (n = score_keep_topk_window(&w->buf, w->z, n_cand, len, n_kept - w->n_recent,
                                            KEEP_BY_POSITION, keep, e)) < 0)
                return -1;
            out->n_keep[l * cv->n_kv + h] = n;
            wrap_kept(w, seq, l, h, keep, n);
        }
    }
    return 0;
}

static int pyramidkv_create(const struct policy_params *p, const struct policy_model *m,
                            void **self, struct policy_info *info, struct eb_err *e)
{
    const struct pyramidkv_params *prm = policy_typed(p);
    struct pyramidkv *s = *self = wrap_policy_new(sizeof *s, &prm->wrap, m, info, e);
    if (!s) return -1;
    s->beta = prm->beta;
    s->n_layer = m->n_layer;
    return 0;
}

const struct policy_ops pyramidkv_ops = {.name = "pyramidkv", .create = pyramidkv_create,
    .destroy = wrap_policy_free, .begin_sequence = wrap_begin_sequence,
    .end_sequence = wrap_end_sequence, .select = pyramidkv_select,
    .shared_params = wrap_params, .window_of = wrap_window_of};
