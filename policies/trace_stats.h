/* trace_stats.h - the statistics of finished traces by sequence id, kept by
 * the steering policies (seal.c, skipkv.c) until the id is reused. */
#ifndef EB_TRACE_STATS_H
#define EB_TRACE_STATS_H

#include "steering.h"

struct trace_stats_table {
    struct policy_trace_stats *done;   /* [n]: zeroed entries are not valid */
    int n;
};

/* Store *st as seq's finished trace (the table grows; out of memory: the
 * entry is dropped, since end_sequence cannot report). */
void trace_stats_table_put(struct trace_stats_table *t, int seq,
                           const struct policy_trace_stats *st);
/* seq's finished trace into *out: 0, or -1 when there is none. */
int trace_stats_table_get(const struct trace_stats_table *t, int seq,
                          struct policy_trace_stats *out);
/* Forget seq's finished trace (its id starts a new one). */
void trace_stats_table_clear(struct trace_stats_table *t, int seq);
void trace_stats_table_free(struct trace_stats_table *t);

#endif
