/* select.h - the shared selector: a policy supplies one score per candidate
 * slot, this does the rest of a select (kvpress's shape: a press is a score
 * function, shared code evicts):
 *
 *   per (layer, kv head), or once per layer (per_layer):
 *     gate      the head is left whole while it holds fewer than B slots
 *               (more than B with evict_above: H2O's every-step rule);
 *     scores    z[0, n_cand) from the scorer, n_cand = len - n_recent
 *               (per_layer: the mean over the layer's kv heads);
 *     dtype     rounded to bf16 when asked (idempotent for scores already so);
 *     pads      pad slots forced to +/-pad_score;
 *     keep      topk(z, B - n_recent) with the one tie rule (score.h), in
 *               score order or by position, then the n_recent newest slots
 *               ascending: the released code's cache order.
 *
 * SkipKV's sentence penalty is a scorer too (an R-KV score minus the
 * penalty); BeaconKV, VaSE, CurDKV and RPC keep their own select (see their
 * files). */
#ifndef EB_POLICY_SELECT_H
#define EB_POLICY_SELECT_H

#include "registry.h"
#include "score.h"

struct scorer {
    /* Scores of the candidates [0, n_cand) of (layer, kv head) into z. */
    int (*score)(void *self, int seq, const struct cache_view *cv, int layer, int kv_head,
                 int n_cand, double *z, struct eb_err *e);
    /* Optional: (layer, kv head) will keep keep[0..n) (H2O moves its state). */
    void (*kept)(void *self, int seq, int layer, int kv_head, const int *keep, int n);
    int per_layer;            /* one keep-set per layer, shared by its kv heads */
    int evict_above;          /* gate len > B instead of len >= B */
    int use_pads;             /* 0: pad slots are scored like any other */
    enum pad_policy pads;
    double pad_score;         /* PAD_SCORE, or PAD_SCORE_H2O for unbounded sums */
    enum keep_order order;
    enum score_dtype dtype;
};

/* The selector's scratch, grown on demand. */
struct selector {
    struct score_buf buf;
    double *z, *one;          /* [cap] */
    int cap;
};
void selector_free(struct selector *s);

/* Fill out for every (layer, kv head) of cv: budget slots per selected head,
 * the n_recent newest always among them (0 <= n_recent <= budget). */
int select_by_score(const struct scorer *sc, void *self, struct selector *st, int seq,
                    const struct cache_view *cv, int budget, int n_recent,
                    struct keep_set *out, struct eb_err *e);

/* The parameter table of a scorer row on the decoding schedule (knorm,
 * tova, keydiff: row_configure_decoding), divide_length alone. */
extern const struct param_def scored_policy_params[];
struct scored_policy_params {
    int divide_length;
};

#endif
