/* trace_stats.c - finished-trace statistics by sequence id (trace_stats.h). */
#include "trace_stats.h"

#include <stdlib.h>
#include <string.h>

void trace_stats_table_put(struct trace_stats_table *t, int seq,
                           const struct policy_trace_stats *st)
{
    if (seq < 0) return;
    if (seq >= t->n) {
        int n = t->n ? t->n : 16;
        while (n <= seq) n *= 2;
        struct policy_trace_stats *d = realloc(t->done, (size_t)n * sizeof *d);
        if (!d) return;
        memset(d + t->n, 0, (size_t)(n - t->n) * sizeof *d);
        t->done = d;
        t->n = n;
    }
    t->done[seq] = *st;
}

int trace_stats_table_get(const struct trace_stats_table *t, int seq,
                          struct policy_trace_stats *out)
{
    if (seq < 0 || seq >= t->n || !t->done[seq].valid) return -1;
    *out = t->done[seq];
    return 0;
}

void trace_stats_table_clear(struct trace_stats_table *t, int seq)
{
    if (seq >= 0 && seq < t->n) memset(&t->done[seq], 0, sizeof t->done[seq]);
}

void trace_stats_table_free(struct trace_stats_table *t)
{
    free(t->done);
    memset(t, 0, sizeof *t);
}
