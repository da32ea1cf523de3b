/* keydiff.c - KeyDiff (arXiv 2504.15364) as kvpress runs it: score =
 * -cos(k_j, anchor), the anchor the mean of the head's unit keys, so the keys
 * least like the average direction are kept; no window.
 * NVIDIA/kvpress @ 8bb29b9c3078452a86d692f29123fa6c793e2b05:
 * kvpress/presses/keydiff_press.py (F.normalize, norms clamped at 1e-12, the
 * mean over every slot; F.cosine_similarity, norms clamped at 1e-8),
 * scorer_press.py (topk), decoding_press.py (DecodingPress as knorm.c: no
 * compression at the prompt, then every divide_length-th decoding forward
 * compresses to the budget: divide_decode_only).  The paper's block-wise
 * iteration is kvpress's BlockPress, not this press.  Pad slots stay out of
 * the anchor (kvpress has none) and are evicted first. */
#include <math.h>

#include "policies.h"
#include "select.h"

static int keydiff_score(void *self, int seq, const struct cache_view *cv, int layer,
                         int kv_head, int n_cand, double *z, struct eb_err *e)
{
    (void)seq;
    struct scored_policy *s = self;
    const unsigned char *pad = cache_view_pad(cv, layer, kv_head);
    const float *k;
    int hd = cv->head_dim, n_real = 0;
    if (score_host_kv(&s->sel.buf, cv, layer, kv_head, n_cand, &k, NULL, e)) return -1;
    double *dot = s->sel.buf.work, a2 = 0.0;
    for (int j = 0; j < n_cand; j++) {
        double s2 = 0.0;
        for (int c = 0; c < hd; c++) s2 += (double)k[(size_t)j * hd + c] * k[(size_t)j * hd + c];
        z[j] = sqrt(s2);
        dot[j] = 0.0;
        n_real += !(pad && pad[j]);
    }
    /* the anchor one channel at a time (no scratch of head_dim): its dot with every key */
    for (int c = 0; c < hd; c++) {
        double a = 0.0;
        for (int j = 0; j < n_cand; j++)
            if (!(pad && pad[j])) a += k[(size_t)j * hd + c] / fmax(z[j], 1e-12);
        a /= n_real > 0 ? n_real : 1;
        a2 += a * a;
        for (int j = 0; j < n_cand; j++) dot[j] += a * k[(size_t)j * hd + c];
    }
    for (int j = 0; j < n_cand; j++) z[j] = -dot[j] / (fmax(z[j], 1e-8) * fmax(sqrt(a2), 1e-8));
    return 0;
}

static const struct scorer keydiff_scorer = {.score = keydiff_score, .order = KEEP_BY_POSITION,
    .use_pads = 1, .pads = PAD_EVICT_FIRST, .pad_score = PAD_SCORE};

static int keydiff_create(const struct policy_params *p, const struct policy_model *m,
                          void **self, struct policy_info *info, struct eb_err *e)
{
    (void)m;
    if (scored_policy_create(&keydiff_scorer, 0, 0, p, self, info, e)) return -1;
    info->divide_decode_only = 1;
    return 0;
}

const struct policy_ops keydiff_ops = {.name = "keydiff", .create = keydiff_create,
    .destroy = scored_policy_destroy, .select = scored_policy_select};
