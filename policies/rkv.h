/* rkv.h - R-KV's per-head score (policies/rkv.c), which SkipKV
 * (policies/skipkv.c) builds on: Z = lambda * I - (1 - lambda) * R over the
 * candidates; the shared selector (select.h) does the rest. */
#ifndef EB_RKV_H
#define EB_RKV_H

#include "score.h"

struct rkv_opts {
    struct importance_opts imp;
    double lambda;
    enum score_dtype dtype;
};

/* R-KV's options from its lambda, window and kernel (which must be odd),
 * with GQA pooling gqa and score precision dtype. */
int rkv_opts_make(double lambda, int window, int kernel, enum score_gqa gqa,
                  enum score_dtype dtype, struct rkv_opts *o, struct eb_err *e);

/* Grow *red to len doubles (redundancy scratch). */
int rkv_reserve(double **red, int *cap, int len, struct eb_err *e);

/* z = lambda * z - (1 - lambda) * red over [0, n_cand), each step rounded
 * as torch does with bf16 (dt SCORE_BF16); z, red as they are. */
void rkv_mix_rows(double *z, const double *red, int n_cand, double lambda, enum score_dtype dt);

/* Z from the importance in z[0, n_cand) (replaced) and the redundancy
 * red[0, n_cand) (unused when lambda is 1; rounded in place with bf16). */
void rkv_mix(const struct rkv_opts *o, double *red, int n_cand, double *z);

/* Z of the candidates [0, n_cand) of (layer, kv head) into z, given the
 * head's redundancy red[0, n_cand) (unused when lambda is 1); with bf16 the
 * importance, R and each step of the mix are rounded as torch does. */
int rkv_score(const struct rkv_opts *o, struct score_buf *b, const struct cache_view *cv,
              int layer, int kv_head, int n_cand, double *red, double *z, struct eb_err *e);

#endif
