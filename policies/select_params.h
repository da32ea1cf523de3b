/* select_params.h - the selector's common options (select.h) as one
 * parameter table, shared by the policies built on select_by_score that
 * take all four (snapkv, rkv: policy_ops.shared_params): pad_policy,
 * cache_order, score_dtype and compat, in that order after the policy's own
 * (run keys hash the parameters in table order).  The helpers read them
 * into a scorer and a schedule for any policy that has the keys. */
#ifndef EB_POLICY_SELECT_PARAMS_H
#define EB_POLICY_SELECT_PARAMS_H

#include "select.h"

extern const struct param_def select_params[];

/* Their values: the first member of a policy's parameter struct that takes
 * them (e.g. struct snapkv_params), so select_params' offsets hold there. */
struct select_opts {
    int pad_policy;    /* PAD_CHOICES */
    int cache_order;   /* KEEP_ORDER_CHOICES */
    int score_dtype;   /* SCORE_DTYPE_CHOICES */
    int compat;        /* COMPAT_CHOICES */
};

/* sc: score, and its pads (PAD_SCORE), keep order and score dtype from o's
 * pad_policy, cache_order and score_dtype; the rest of *sc is zeroed. */
void select_params_scorer(const struct select_opts *o,
                          int (*score)(void *self, int seq, const struct cache_view *cv,
                                       int layer, int kv_head, int n_cand, double *z,
                                       struct eb_err *e),
                          struct scorer *sc);

/* *info for a scorer on the last `window` queries that keeps the `window`
 * newest slots, on schedule every divide_length tokens, and compat=released's
 * step counter carried across sequences as R-KV's modeling.py carries it
 * (only the divide schedule has one: -1 with e set otherwise). */
int select_params_info(const struct select_opts *o, int window, int divide_length,
                       enum policy_schedule schedule, struct policy_info *info, struct eb_err *e);

#endif
