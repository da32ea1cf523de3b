/* vase.h - the selection rules of VaSE and its CUR baseline
 * (../shared/specs/vase_beaconkv.md §2.3-2.6) on host arrays.  policies/vase*.c
 * feed them from the cache; tests/test_vase.c checks them against
 * tools/golden/vase_ref.py.  Tie rule: equal scores rank the lower index
 * first (as in policies/score.h). */
#ifndef EB_VASE_H
#define EB_VASE_H

#include "../util/err.h"

/* One kv head's candidates, in cache-slot order. */
struct vase_attnv_in {
    int n;                      /* candidates */
    int n_sink;                 /* the first n_sink slots get range +inf */
    int n_large;                /* protected slots: the largest value ranges */
    int k;                      /* slots to keep, n_large <= k <= n (n_large is clamped) */
    const double *range;        /* [n] max - min of each value row */
    const double *score;        /* [n] smoothed window attention, mean over the group */
    const unsigned char *pad;   /* [n] or NULL: pads are never protected nor sampled */
    const double *gumbel;       /* [n] Gumbel noise; NULL: deterministic top-k (range_attn) */
};

/* VaSE-AttnV (§2.4): the n_large slots of largest range (descending), then
 * k - n_large slots sampled without replacement in proportion to score, in
 * draw order (fallback: highest range).  out[k] are candidate indices. */
int vase_attnv_select(const struct vase_attnv_in *in, int *out, struct eb_err *e);

/* VaSE-DKV / CurDKV (§2.5-2.6): s_j = lk_j * lv_j / sum_i(lk_i * lv_i), the
 * first n_sink slots 1.0, pads (may be NULL) -1; out[k] = the top k in
 * descending order. */
int vase_dkv_select(int n, int n_sink, int k, const double *lk, const double *lv,
                    const unsigned char *pad, int *out, struct eb_err *e);

#endif
