/* trace_stats.c - finished-trace statistics by sequence id (trace_stats.h). */
#include "trace_stats.h"

#include <stdlib.h>
#include <string.h>

static int grow(struct trace_stats_table *t, int seq)
{
    if (seq < t->n) return 0;
    int n = t->n ? t->n : 16;
    while (n <= seq) n *= 2;
    struct policy_trace_stats *d = realloc(t->done, (size_t)n * sizeof *d);
    if (!d) return -1;
    t->done = d;
    struct trace_sentences *s = realloc(t->sents, (size_t)n * sizeof *s);
    if (!s) return -1; /* done grew alone: harmless, t->n still bounds both */
    t->sents = s;
    memset(d + t->n, 0, (size_t)(n - t->n) * sizeof *d);
    memset(s + t->n, 0, (size_t)(n - t->n) * sizeof *s);
    t->n = n;
    return 0;
}

void trace_stats_table_put(struct trace_stats_table *t, int seq,
                           const struct policy_trace_stats *st, struct sent_info *v,
                           int n_sents, int lost)
{
    if (seq < 0 || grow(t, seq)) {
        free(v);
        return;
    }
    trace_stats_table_clear(t, seq);
    t->done[seq] = *st;
    t->sents[seq] = (struct trace_sentences){v, lost ? 0 : n_sents, lost};
    if (lost) {
        free(v);
        t->sents[seq].v = NULL;
    }
}

int trace_stats_table_get(const struct trace_stats_table *t, int seq,
                          struct policy_trace_stats *out)
{
    if (seq < 0 || seq >= t->n || !t->done[seq].valid) return -1;
    *out = t->done[seq];
    return 0;
}

int trace_stats_table_sentences(const struct trace_stats_table *t, int seq,
                                struct sent_info **out, int *n, struct eb_err *e)
{
    *out = NULL;
    *n = 0;
    if (seq < 0 || seq >= t->n || !t->done[seq].valid) return 1;
    const struct trace_sentences *s = &t->sents[seq];
    if (s->lost)
        return eb_fail(e, "the sentences of sequence %d were not kept (out of memory, or its "
                          "tracker failed)", seq);
    if (s->n == 0) return 0;
    if (!(*out = eb_malloc((size_t)s->n * sizeof **out, e))) return -1;
    memcpy(*out, s->v, (size_t)s->n * sizeof **out);
    *n = s->n;
    return 0;
}

void trace_stats_table_clear(struct trace_stats_table *t, int seq)
{
    if (seq < 0 || seq >= t->n) return;
    memset(&t->done[seq], 0, sizeof t->done[seq]);
    free(t->sents[seq].v);
    memset(&t->sents[seq], 0, sizeof t->sents[seq]);
}

void trace_stats_table_free(struct trace_stats_table *t)
{
    for (int i = 0; i < t->n; i++) free(t->sents[i].v);
    free(t->done);
    free(t->sents);
    memset(t, 0, sizeof *t);
}
