/* attend.h - what RPC (policies/rpc.c) and BeaconKV (policies/beaconkv*.c)
 * share (attend.c): attention of a few host query rows to a slot range of one
 * kv head, reduced over the rows, the protected prompt prefix of a head, and
 * the keep-set step of their scores. */
#ifndef EB_POLICY_ATTEND_H
#define EB_POLICY_ATTEND_H

#include "policy.h"
#include "score.h"

/* Backend and host scratch, grown on demand. */
struct attend_buf {
    struct backend *be;
    float *dq, *dy;          /* backend: query rows, logits */
    size_t dq_cap, dy_cap;
    float *hy;               /* host logits */
    size_t hy_cap;
};
void attend_buf_free(struct attend_buf *b);

enum attend_reduce { ATTEND_SUM = 0, ATTEND_MAX = 1 };

/* What RPC and BeaconKV score with: recorded queries brought to the host, the
 * rows that attend, and per-candidate doubles grown on demand. */
struct attend_scratch {
    struct attend_buf ab;
    struct score_buf sb;
    float *qh;               /* host [n_qh]: recorded query rows [..][n_head * head_dim] */
    float *rows;             /* host [n_rows]: attending rows [..][head_dim] */
    double *s, *acc, *tmp;   /* [cap]: scores, a layer's sum (RPC), pooling scratch */
    int cap;
};
/* Zeroed, with qh and rows allocated (counts of floats). */
int attend_scratch_open(struct attend_scratch *w, size_t n_qh, size_t n_rows, struct eb_err *e);
/* s, acc and tmp for at least n candidates (contents kept). */
int attend_scratch_reserve(struct attend_scratch *w, int n, struct eb_err *e);
void attend_scratch_free(struct attend_scratch *w);

/* For each of the nq host rows q[r][head_dim]: logits q . k_j / sqrt(head_dim)
 * over the slots j in [k0, k0 + n) of (layer, kv_head), then (softmax != 0)
 * the softmax over those n slots; reduced over the rows into out[0, n):
 * ATTEND_SUM adds to out, ATTEND_MAX raises out to the row's value.  The
 * caller initialises out (0, or -INFINITY for a max). */
int attend_reduce(struct attend_buf *b, const struct cache_view *cv, int layer, int kv_head,
                  int k0, int n, const float *q, int nq, int softmax, enum attend_reduce red,
                  double *out, struct eb_err *e);

/* Slots of (layer, kv_head) holding prompt tokens (positions < n_prompt):
 * a prefix, since positions ascend. */
int prompt_slots(const struct cache_view *cv, int layer, int kv_head, int n_prompt);

/* Append the query rows of kv head h's group to dst ([..][head_dim]): for
 * each of the `rows` host rows qh[r][n_head * head_dim], its heads
 * h * group .. h * group + group - 1.  Returns the rows appended. */
int group_query_rows(float *dst, const float *qh, int rows, int n_head, int head_dim, int h,
                     int group);

/* The keep-set of a head whose slots are [0, p) prompt, [p, p + n) scored
 * candidates s[0, n) and [p + n, len) recent: the prompt, the top keep_n
 * candidates (tie rule of score.h) and the recent slots, ascending.  Returns
 * the count, or -1 with e set. */
int keep_prompt_topk_recent(struct score_buf *sb, const double *s, int p, int n, int keep_n,
                            int len, int *keep, struct eb_err *e);

#endif
