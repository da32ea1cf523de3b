/* row.h - a scorer policy as a registry row: a score function over lazily
 * computed views of one head, its typed parameters and a few settings.  The
 * registry builds the rest (row.c): create, destroy, select on the shared
 * selector (select.h), the batched plan, and the attention sums a row that
 * asks for them reads.  kvpress's shape: a press is a score, shared code
 * evicts.
 *
 * A row file holds the parameter struct and table (param_def.offset), the
 * score, and `const struct scorer_row NAME_row`; registry.c names it in a
 * row with `.row = &NAME_row`.
 *
 * Components compose into a row: an additive host term over the scores
 * (`add`: SkipKV's sentence penalty) and the sentence and steering follower
 * (`follow`, follow.h: SkipKV, SEAL, fullkv-pss), whose hooks (tokens,
 * hidden rows, steering, trace statistics) the registry passes on. */
#ifndef EB_POLICY_ROW_H
#define EB_POLICY_ROW_H

#include "follow.h"
#include "select_batch.h"

/* One (layer, kv head) of one compression, as a row's score sees it.  The
 * views below are computed on first use and at most once per head and
 * compression (the keys, the window importance, the redundancy, ...), on
 * the backend where a primitive serves, then brought to the host. */
struct score_ctx {
    const struct cache_view *cv;
    const void *prm;           /* the row's typed parameters */
    void *state;               /* the row's state (scorer_row.state), or NULL */
    int seq, layer, kv_head;
    int len;                   /* slots the head holds */
    int n_cand;                /* candidates [0, n_cand): the rest is the recent window */
    struct row_views *views;   /* row_views.c: the memo */
    struct follow_seq *follow; /* the sequence's follower (scorer_row.follow), or NULL */
};

/* Host views, valid until the next head; NULL with e set on failure. */
/*   the head's keys and values, rows [len][head_dim] */
const float *ctx_keys(struct score_ctx *c, struct eb_err *e);
const float *ctx_values(struct score_ctx *c, struct eb_err *e);
/*   the L2 norm of each key [len] */
const double *ctx_key_norms(struct score_ctx *c, struct eb_err *e);
/*   the window importance of the candidates [n_cand] (score.h §1.3 options) */
const double *ctx_window_attn(struct score_ctx *c, const struct importance_opts *o,
                              struct eb_err *e);
/*   the last recorded query's attention, the group's mean, candidates [n_cand] */
const double *ctx_last_query_attn(struct score_ctx *c, struct eb_err *e);
/*   R-KV's key redundancy of every slot [len] (score_redundancy) */
const double *ctx_redundancy(struct score_ctx *c, float threshold, int no_match_zero_col0,
                             struct eb_err *e);
/*   the scores so far: the attention every query has paid each slot [len],
 *   summed by the row (needs POLICY_NEED_ATTN_PROBS), a slot's sum moving
 *   with it when the cache compacts */
const double *ctx_attn_sum(struct score_ctx *c, struct eb_err *e);
/*   the slots' original positions and pad flags [len] (pads NULL: none) */
const int *ctx_positions(const struct score_ctx *c);
const unsigned char *ctx_pads(const struct score_ctx *c);

/* What an instance of a row is: the selection settings and the schedule. */
struct row_config {
    struct scorer sel;         /* order, pads, per_layer, dtype, evict_above (score: unused) */
    struct policy_info info;   /* needs, q_window, window (the newest slots always kept,
                                  unless recent says otherwise), schedule, divide_length */
    int add;                   /* 1: scorer_row.add applies to this instance */
};

/* The follower a row composes (follow.h): its options from the typed
 * parameters, and what the row does at a sampled token whose forward raised
 * the step flag, before the token is pushed (SkipKV: alpha from N_o, the
 * new sentences compared; NULL: nothing). */
struct row_follow {
    int (*opts)(const void *prm, const struct policy_model *m, struct follow_opts *o,
                struct eb_err *e);
    void (*at_flag)(const void *prm, struct follow_seq *q);
};

/* A row's own state, for scores that need more than the views (R-KV's
 * batch0 bug): made with the instance, told of sequences. */
struct row_state_ops {
    int (*create)(const void *prm, const struct policy_model *m, void **state,
                  struct eb_err *e);
    void (*destroy)(void *state);
    int (*begin_sequence)(void *state, int seq, const struct seq_view *sv, struct eb_err *e);
    void (*end_sequence)(void *state, int seq);
};

struct scorer_row {
    /* Scores of the candidates c->n_cand into z (pads and bf16 rounding are
     * the selector's).  NULL: the row never selects (SEAL). */
    int (*score)(struct score_ctx *c, double *z, struct eb_err *e);
    /* Where row_config.add: a term added to the candidates' scores z (after
     * score per sequence; a row uploaded beside the batched plan's scores). */
    int (*add)(struct score_ctx *c, double *z, struct eb_err *e);
    /* The config from the typed parameters, over `base` as a start; NULL:
     * base as it is.  Pure: the budget check at --dry-run runs it too. */
    int (*configure)(const void *prm, struct row_config *c, struct eb_err *e);
    struct row_config base;
    /* The newest slots always kept at a budget, for "budget - k" rules
     * (StreamingLLM's sinks, H2O's heavy share); NULL: info.window. */
    int (*recent)(const void *prm, int budget);
    /* The batched plan (select_batch.h) over select_batch_plan_of's gate,
     * order and n_recent: sets the score; 0: this config selects per
     * sequence.  NULL: per sequence. */
    int (*batch)(const void *prm, const struct row_config *c, struct batch_plan *out);
    const struct row_state_ops *state;   /* or NULL */
    const struct row_follow *follow;     /* or NULL */
    /* A parameter table shared with other rows (select_params), its struct
     * the first member of this row's; or NULL. */
    const struct param_def *shared_params;
};

/* The registry's side (policy_instance.c): an instance of row, through the
 * vtable row_ops_of(row) (its follower's hooks only where it has one). */
const struct policy_ops *row_ops_of(const struct scorer_row *row);
int row_create(const struct scorer_row *row, const struct policy_params *p,
               const struct policy_model *m, void **self, struct policy_info *info,
               struct eb_err *e);
/* The window (slots always kept) of row with parameters p, before any
 * instance; -1 with e set when p does not configure. */
int row_window(const struct scorer_row *row, const struct policy_params *p, struct eb_err *e);

/* configure for rows whose parameters are scored_policy_params alone
 * (divide_length): kvpress's DecodingPress schedule. */
int row_configure_decoding(const void *prm, struct row_config *c, struct eb_err *e);

#endif
