/* row_priv.h - an instance of a scorer row (row.c), shared with its
 * follower's hooks (row_follow.c); nothing outside the two reads it. */
#ifndef EB_POLICY_ROW_PRIV_H
#define EB_POLICY_ROW_PRIV_H

#include "row.h"

struct row_policy {
    const struct scorer_row *row;
    _Alignas(double) unsigned char prm[POLICY_TYPED_BYTES];   /* the typed parameters */
    struct row_config cfg;
    struct scorer sc;           /* cfg.sel with row.c's adapters */
    struct selector sel;
    struct row_views *views;
    struct policy_model m;
    struct seq_table sums;      /* NEED_ATTN_PROBS: struct row_sums per sequence */
    void *state;                /* row->state's */
    struct follower *f;         /* row->follow's, or NULL */
    double *add_z;              /* the batched added row's scratch */
    int add_cap;
};

/* The follower of s->row->follow opened for s (s->f). */
int row_follow_open(struct row_policy *s, struct eb_err *e);

/* The vtable hooks a row with a follower adds (self: the struct row_policy). */
int row_follow_observe(void *self, int seq, const struct step_view *sv, struct eb_err *e);
int row_follow_observe_hidden(void *self, int seq, const float *rows, int n, int dim,
                              struct eb_err *e);
int row_follow_steer(void *self, int seq, int layer, struct backend *be, float *hidden,
                     int n_rows, int dim, struct eb_err *e);
int row_follow_trace_stats(const void *self, int seq, struct policy_trace_stats *out);
int row_follow_trace_sentences(const void *self, int seq, struct sent_info **out, int *n,
                               struct eb_err *e);

#endif
