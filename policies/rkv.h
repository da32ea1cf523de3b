/* rkv.h - R-KV's per-head scoring steps (policies/rkv.c), which SkipKV
 * (policies/skipkv.c) builds on: Z = lambda * I - (1 - lambda) * R, then pads
 * and keep = topk(Z[0, L-w), B-w) + window (in score order by default, as
 * the released code leaves its cache; see score.h enum keep_order). */
#ifndef EB_RKV_H
#define EB_RKV_H

#include "score.h"

/* R-KV's importance options from the policy's window and kernel parameters
 * (kernel must be odd), with GQA pooling gqa. */
int rkv_importance_opts(const struct policy_params *p, enum score_gqa gqa,
                        struct importance_opts *imp, struct eb_err *e);

/* Host scores of one head, grown on demand. */
struct rkv_scratch {
    double *z, *red;     /* [cap]: scores (importance, then Z), redundancy */
    int cap;
};
void rkv_scratch_free(struct rkv_scratch *sc);

/* Grow sc to len slots and write the importance of the candidates
 * [0, len - imp->window) of (layer, kv head) into sc->z. */
int rkv_importance(struct rkv_scratch *sc, struct score_buf *b, const struct cache_view *cv,
                   int layer, int kv_head, const struct importance_opts *imp, int len,
                   struct eb_err *e);

/* z[j] = lambda * z[j] - (1 - lambda) * red[j] for j < n_cand; with bf16,
 * both products and the difference are rounded as torch does in bf16. */
void rkv_mix(double *z, const double *red, int n_cand, double lambda, enum score_dtype dt);

/* Pad scores per pads, then head (layer, kv head)'s keep-set in out: the top
 * budget - window of z[0, len - window) plus the window; sets its n_keep. */
int rkv_keep(struct score_buf *b, double *z, const struct cache_view *cv, int layer, int kv_head,
             int budget, int window, enum pad_policy pads, enum keep_order order,
             struct keep_set *out, struct eb_err *e);

#endif
