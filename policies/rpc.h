/* rpc.h - what RPC (policies/rpc.c) and BeaconKV (policies/beaconkv.c) share:
 * attention of a few host query rows to a slot range of one kv head, reduced
 * over the rows, and the protected prompt prefix of a head. */
#ifndef EB_RPC_H
#define EB_RPC_H

#include "policy.h"

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

#endif
