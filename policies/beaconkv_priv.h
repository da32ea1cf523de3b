/* beaconkv_priv.h - what the BeaconKV files share (beaconkv.c: the policy
 * and its select; beacon_buffer.c: the per-sequence query buffers and the
 * observation rows drawn from them).  Private to policies/beacon*.c. */
#ifndef EB_BEACONKV_PRIV_H
#define EB_BEACONKV_PRIV_H

#include "attend.h"
#include "beaconkv.h"
#include "policies.h"
#include "score.h"

struct beacon_seq {
    int n_prompt;
    int last_pos;         /* position of the newest buffered query; -1: none */
    float *buf;           /* [n_layer * n_units][buf_upper][unit_dim] pre-RoPE queries */
    int *count;           /* [n_layer * n_units] */
};

struct beaconkv {
    int recent, beacons, upper, lower, buffer, softmax, per_head, kernel, counts_prompt;
    int n_units, unit_dim, group;
    struct policy_model m;
    struct seq_table seqs;
    struct attend_scratch w; /* qh: [recent][n_head * head_dim]; rows: the observation
                                rows [(beacons + recent) * group][head_dim] */
    int *sel;                /* [buf_upper]: FPS picks */
};

/* begin_sequence / end_sequence: a sequence's empty query buffers. */
int beaconkv_begin(void *self, int seq, const struct seq_view *sv, struct eb_err *e);
void beaconkv_end(void *self, int seq);
void beacon_seq_free(void *q);
/* Append the newest query of every layer (position next_pos - 1), pre-RoPE,
 * thinning a full buffer by continual FPS. */
int beacon_record_query(struct beaconkv *s, struct beacon_seq *q, const struct cache_view *cv,
                        struct eb_err *e);
/* The observation rows of kv head h of layer l into s->w.rows ([n][head_dim]):
 * the beacons rotated to the current position, then the `rows` recent
 * queries in s->w.qh; returns n, or -1 with e set. */
int beacon_observation(struct beaconkv *s, struct beacon_seq *q, const struct cache_view *cv,
                       int l, int h, int rows, struct eb_err *e);

#endif
