/* follow.c - sentence tracking and steering as one component (see follow.h). */
#include "follow.h"

#include <stdlib.h>
#include <string.h>

int follower_open(struct follower *f, const struct follow_opts *o, const struct policy_model *m,
                  struct eb_err *e)
{
    memset(f, 0, sizeof *f);
    f->o = *o;
    if (!m->text)
        return eb_fail(e, "policy %s needs the model's tokenizer (sentence delimiters)", o->name);
    if (sent_tokens_from_text(m->text, o->check_space, &f->tok, e)) return -1;
    if (o->steer && steerer_open(&f->sr, m, o->layer, o->mode, &f->tok, o->name, e)) return -1;
    f->sr.pairs = o->pairs;
    return 0;
}

static void seq_free(void *p)
{
    struct follow_seq *q = p;
    if (!q) return;
    sent_tracker_free(&q->tr);
    steer_seq_free(&q->st);
    free(q);
}

void follower_close(struct follower *f)
{
    seq_table_free(&f->seqs, seq_free);
    if (f->o.steer) steerer_close(&f->sr);
    sent_tokens_free(&f->tok);
    trace_stats_table_free(&f->done);
}

int follower_begin(struct follower *f, int seq, const struct seq_view *sv, struct eb_err *e)
{
    void **slot = seq_table_slot(&f->seqs, seq, e);
    if (!slot) return -1;
    seq_free(*slot);
    struct follow_seq *q = *slot = eb_calloc(1, sizeof *q, e);
    if (!q) return -1;
    q->alpha = f->o.alpha0;
    q->n_prompt = sv->n_prompt;
    if (sv->n_prompt > 0 && !sv->prompt)
        return eb_fail(e, "policy %s: the runtime passed no prompt tokens", f->o.name);
    if (sent_tracker_init(&q->tr, &f->tok, f->o.dim, f->o.tau, e) ||
        sent_tracker_tokens(&q->tr, sv->prompt, sv->n_prompt, e))
        return -1;
    if (f->o.steer && steer_seq_begin(&q->st, f->o.mode, f->sr.pairs, sv, e)) return -1;
    trace_stats_table_clear(&f->done, seq);
    return 0;
}

int follower_live(struct follower *f, int seq, struct follow_seq **q, struct eb_err *e)
{
    *q = seq_table_get(&f->seqs, seq);
    if (*q && (*q)->failed)
        return eb_fail(e, "policy %s: sequence %d's tracking failed earlier", f->o.name, seq);
    return 0;
}

static void fill_stats(const struct follower *f, const struct follow_seq *q,
                       struct policy_trace_stats *out)
{
    sent_tracker_stats(&q->tr, &out->s);
    out->alpha = f->o.steer ? q->alpha : 0.0;
    out->n_steered = q->st.n_steered;
    out->valid = 1;
}

void follower_end(struct follower *f, int seq)
{
    struct follow_seq *q = seq_table_get(&f->seqs, seq);
    if (!q) return;
    struct policy_trace_stats st = {0};
    sent_tracker_compare(&q->tr); /* the trace's last sentences count in its statistics */
    fill_stats(f, q, &st);
    struct sent_info *v = NULL;
    struct eb_err e;
    int n = 0, lost = q->failed || sent_tracker_export(&q->tr, q->n_prompt, &v, &n, &e);
    trace_stats_table_put(&f->done, seq, &st, v, n, lost);
    seq_table_drop(&f->seqs, seq, seq_free);
}

int follower_push(struct follower *f, struct follow_seq *q, int token, struct eb_err *e)
{
    if (sent_tracker_tokens(&q->tr, &token, 1, e) ||
        (f->o.steer && steer_seq_push(&q->st, token, e))) {
        q->failed = 1;
        return -1;
    }
    return 0;
}

int follower_steer(struct follower *f, int seq, int layer, struct backend *be, float *hidden,
                   int n_rows, int dim, struct eb_err *e)
{
    if (!f->o.steer) return 0;
    struct follow_seq *q = seq_table_get(&f->seqs, seq);
    if (!q) return eb_fail(e, "policy %s: steer for unknown sequence %d", f->o.name, seq);
    if (q->failed)
        return eb_fail(e, "policy %s: sequence %d's tracking failed earlier", f->o.name, seq);
    return steerer_apply(&f->sr, &q->st, layer, be, hidden, n_rows, dim, q->alpha, e);
}

int follower_trace_stats(const struct follower *f, int seq, struct policy_trace_stats *out)
{
    memset(out, 0, sizeof *out);
    const struct follow_seq *q = seq_table_get(&f->seqs, seq);
    if (q) {
        fill_stats(f, q, out);
        return 0;
    }
    return trace_stats_table_get(&f->done, seq, out);
}

int follower_trace_sentences(const struct follower *f, int seq, struct sent_info **out, int *n,
                             struct eb_err *e)
{
    *out = NULL;
    *n = 0;
    const struct follow_seq *q = seq_table_get(&f->seqs, seq);
    if (q) return sent_tracker_export(&q->tr, q->n_prompt, out, n, e);
    return trace_stats_table_sentences(&f->done, seq, out, n, e);
}
