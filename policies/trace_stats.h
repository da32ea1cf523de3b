/* trace_stats.h - the statistics and sentences of finished traces by
 * sequence id, kept by the steering policies (seal.c, skipkv.c) until the id
 * is reused. */
#ifndef EB_TRACE_STATS_H
#define EB_TRACE_STATS_H

#include "steering.h"

/* A finished trace's sentences (sent_tracker_export). */
struct trace_sentences {
    struct sent_info *v;      /* [n], owned */
    int n;
    int lost;                 /* 1: not kept (out of memory, or the tracker failed) */
};

struct trace_stats_table {
    struct policy_trace_stats *done;   /* [n]: zeroed entries are not valid */
    struct trace_sentences *sents;     /* [n]: valid with done[seq] */
    int n;
};

/* Store *st as seq's finished trace with its sentences v[0..n_sents) (the
 * table takes v; lost = 1 records that they could not be kept).  The table
 * grows; out of memory: the entry is dropped (and v freed), since
 * end_sequence cannot report. */
void trace_stats_table_put(struct trace_stats_table *t, int seq,
                           const struct policy_trace_stats *st, struct sent_info *v,
                           int n_sents, int lost);
/* seq's finished trace into *out: 0, or -1 when there is none. */
int trace_stats_table_get(const struct trace_stats_table *t, int seq,
                          struct policy_trace_stats *out);
/* A malloc'd copy of seq's finished sentences into *out, *n (policy_trace_sentences'
 * contract): 0, 1 when there is no finished trace, -1 when its sentences were
 * lost or on out of memory (e set). */
int trace_stats_table_sentences(const struct trace_stats_table *t, int seq,
                                struct sent_info **out, int *n, struct eb_err *e);
/* Forget seq's finished trace (its id starts a new one). */
void trace_stats_table_clear(struct trace_stats_table *t, int seq);
void trace_stats_table_free(struct trace_stats_table *t);

#endif
