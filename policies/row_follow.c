/* row_follow.c - the follower a scorer row composes (row.h: scorer_row.follow;
 * follow.h): opened from the row's parameters, and the hooks that pass
 * sampled tokens, hidden rows, steering and the trace statistics on to it. */
#include <stdlib.h>

#include "policies.h"
#include "row_priv.h"

int row_follow_open(struct row_policy *s, struct eb_err *e)
{
    struct follow_opts o;
    if (s->row->follow->opts(s->prm, &s->m, &o, e)) return -1;
    if (!(s->f = eb_calloc(1, sizeof *s->f, e))) return -1;
    if (follower_open(s->f, &o, &s->m, e)) {
        follower_close(s->f);   /* what it opened before failing */
        free(s->f);
        s->f = NULL;
        return -1;
    }
    return 0;
}

int row_follow_observe(void *self, int seq, const struct step_view *sv, struct eb_err *e)
{
    struct row_policy *s = self;
    struct follow_seq *q;
    if (follower_live(s->f, seq, &q, e)) return -1;
    if (!q) return 0;
    /* The forward that raised the step flag ends: its rows are in, its
     * sampled token not yet labelled (the released code labels a token in
     * the forward that processes it). */
    if (sv->selects_next && s->row->follow->at_flag) s->row->follow->at_flag(s->prm, q);
    return follower_push(s->f, q, sv->token, e);
}

int row_follow_observe_hidden(void *self, int seq, const float *rows, int n, int dim,
                              struct eb_err *e)
{
    struct row_policy *s = self;
    struct follow_seq *q;
    if (follower_live(s->f, seq, &q, e)) return -1;
    if (q && sent_tracker_rows(&q->tr, rows, n, dim, e)) {
        q->failed = 1;
        return -1;
    }
    return 0;
}

int row_follow_steer(void *self, int seq, int layer, struct backend *be, float *hidden,
                     int n_rows, int dim, struct eb_err *e)
{
    struct row_policy *s = self;
    return follower_steer(s->f, seq, layer, be, hidden, n_rows, dim, e);
}

int row_follow_trace_stats(const void *self, int seq, struct policy_trace_stats *out)
{
    const struct row_policy *s = self;
    return follower_trace_stats(s->f, seq, out);
}

int row_follow_trace_sentences(const void *self, int seq, struct sent_info **out, int *n,
                               struct eb_err *e)
{
    const struct row_policy *s = self;
    return follower_trace_sentences(s->f, seq, out, n, e);
}
