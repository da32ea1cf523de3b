/* wrap.h - schedules and budgets as composition: a wrapper policy ranks by
 * the scores of an inner scorer policy (policy_ops.scorer) and decides the
 * budgets itself, per kv head (adakv.c, AdaKV) or per layer (pyramidkv.c,
 * PyramidKV).  The inner is built from the wrapper's parameters (wrap_params:
 * over, window, divide_length, pad_policy, score_dtype), its other parameters
 * at its defaults:
 *   over=snapkv  SnapKV as kvpress's SnapKVPress runs it (softmax over all
 *                keys, causal inside the window, avg-pool 5);
 *   over=rkv     R-KV (policies/rkv.c);
 *   over=knorm, over=keydiff  kvpress's KNorm and KeyDiff (no window);
 *   and, for a schedule (scheduled.c), tova, streamingllm, h2o, random,
 *   lagkv and expected-attention.
 * A key the inner has no parameter for (window, pad_policy, score_dtype) is
 * not passed on.
 * A wrapper runs on kvpress's DecodingPress schedule (POLICY_DECODING:
 * the prompt's forward never compresses) and keeps the cache in position
 * order. */
#ifndef EB_POLICY_WRAP_H
#define EB_POLICY_WRAP_H

#include "select.h"

struct wrap {
    struct policy *inner;
    const struct scorer *sc;     /* the inner's; its self is inner->self */
    int n_recent;                /* the newest slots the inner always keeps */
    struct score_buf buf;        /* top-k scratch */
    double *z;                   /* [cap] scores */
    int *idx;                    /* [cap] slot indices */
    int cap;
};

/* The wrapper's shared parameter table (policy_ops.shared_params), and its
 * values: the first member of a wrapper's parameter struct. */
extern const struct param_def wrap_params[];
struct wrap_params {
    int over;            /* snapkv|rkv */
    int window;
    int divide_length;
    int pad_policy;      /* PAD_CHOICES */
    int score_dtype;     /* SCORE_DTYPE_CHOICES */
};

/* A wrapper instance of `size` zeroed bytes whose first member is its struct
 * wrap, its inner built from wp; *info: the inner's needs and window on
 * DecodingPress's schedule, every divide_length decoding forwards.  NULL
 * with e set (nothing left allocated). */
void *wrap_policy_new(size_t size, const struct wrap_params *wp, const struct policy_model *m,
                      struct policy_info *info, struct eb_err *e);
/* The vtable entries of such an instance: destroy, and the inner's
 * begin_sequence / end_sequence. */
void wrap_policy_free(void *self);
int wrap_begin_sequence(void *self, int seq, const struct seq_view *sv, struct eb_err *e);
void wrap_end_sequence(void *self, int seq);

/* The inner's spec "over:key=value,..." from wp into spec. */
int wrap_inner_spec(const struct wrap_params *wp, char *spec, size_t size, struct eb_err *e);

/* policy_ops.window_of of a wrapper: its inner's window. */
int wrap_window_of(const void *prm);

/* Room for n scores and indices in w->z, w->idx. */
int wrap_reserve(struct wrap *w, int n, struct eb_err *e);
/* The inner's scores of (layer, kv head)'s candidates [0, n_cand) into z,
 * rounded to its score dtype, its pads forced, as the selector has them. */
int wrap_scores(struct wrap *w, int seq, const struct cache_view *cv, int layer, int kv_head,
                int n_cand, double *z, struct eb_err *e);
/* The inner's kept hook, if it has one. */
void wrap_kept(struct wrap *w, int seq, int layer, int kv_head, const int *keep, int n);

/* kvpress decoding_press.py _find_target_compression_ratio: the ratio whose
 * int(k_len * (1 - ratio)) is target (a bisection of 20 steps), 0 when
 * k_len <= target; in the same double arithmetic as Python's floats. */
double wrap_target_ratio(int k_len, int target);

#endif
