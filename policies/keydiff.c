/* keydiff.c - KeyDiff (arXiv 2504.15364) as kvpress runs it: score =
 * -cos(k_j, anchor), the anchor the mean of the head's unit keys, so the keys
 * least like the average direction are kept; no window.
 * NVIDIA/kvpress @ 8bb29b9c3078452a86d692f29123fa6c793e2b05:
 * kvpress/presses/keydiff_press.py (F.normalize, norms clamped at 1e-12, the
 * mean over every slot; F.cosine_similarity, norms clamped at 1e-8),
 * scorer_press.py (topk), decoding_press.py (DecodingPress as knorm.c: no
 * compression at the prompt, then every divide_length-th decoding forward
 * compresses to the budget: POLICY_DECODING).  The paper's block-wise
 * iteration is kvpress's BlockPress, not this press.  Pad slots stay out of
 * the anchor (kvpress has none) and are evicted first. */
#include <math.h>

#include "policies.h"
#include "row.h"

static int keydiff_score(struct score_ctx *c, double *z, struct eb_err *e)
{
    const unsigned char *pad = ctx_pads(c);
    const float *k = ctx_keys(c, e);
    const double *norm = k ? ctx_key_norms(c, e) : NULL;
    if (!norm) return -1;
    int hd = c->cv->head_dim, n_real = 0;
    double a2 = 0.0;
    for (int j = 0; j < c->n_cand; j++) {
        z[j] = 0.0; /* the dot with the anchor */
        n_real += !(pad && pad[j]);
    }
    /* the anchor one channel at a time (no scratch of head_dim): its dot with every key */
    for (int d = 0; d < hd; d++) {
        double a = 0.0;
        for (int j = 0; j < c->n_cand; j++)
            if (!(pad && pad[j])) a += k[(size_t)j * hd + d] / fmax(norm[j], 1e-12);
        a /= n_real > 0 ? n_real : 1;
        a2 += a * a;
        for (int j = 0; j < c->n_cand; j++) z[j] += a * k[(size_t)j * hd + d];
    }
    for (int j = 0; j < c->n_cand; j++) z[j] = -z[j] / (fmax(norm[j], 1e-8) * fmax(sqrt(a2), 1e-8));
    return 0;
}

const struct scorer_row keydiff_row = {.score = keydiff_score,
    .configure = row_configure_decoding,
    .base.sel = {.order = KEEP_BY_POSITION, .use_pads = 1, .pads = PAD_EVICT_FIRST,
                 .pad_score = PAD_SCORE}};
