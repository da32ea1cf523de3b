/* bench_long.h - what eviction buys in speed and memory: decode tokens/s
 * against context length (`bench --contexts`) and the largest batch whose KV
 * fits under a cap (`bench --max-batch`), FullKV against policies at
 * budgets, one row per point printed and written to the bench table. */
#ifndef EB_BENCH_LONG_H
#define EB_BENCH_LONG_H

#include <stddef.h>
#include <stdio.h>

#include "harness/exp/session.h"
#include "harness/store/store.h"
#include "util/err.h"

enum { BENCH_MAX_LIST = 16 };

/* A policy of the sweep: spec and budget (0: FullKV). */
struct bench_policy {
    char spec[64];
    int budget;
};

struct bench_long_opts {
    const char *model;           /* the name rows carry */
    const char *device;          /* "cpu" unless --device */
    int threads;                 /* 0: all cores */
    int contexts[BENCH_MAX_LIST], n_contexts;
    int batches[BENCH_MAX_LIST], n_batches;
    enum kv_type kv_types[4];
    int n_kv;
    struct bench_policy pols[BENCH_MAX_LIST]; /* FullKV first */
    int n_pols;
    int n_new;                   /* decode steps per point */
    int src_len;                 /* tokens of the real prefill that fills the context */
    size_t kv_cap;               /* --max-batch: KV bytes allowed; 0 (a GPU): the memory plan
                                    decides from the device's free memory */
    int largest_only;            /* --max-batch: measure only the largest batch (and say which
                                    batch past it does not fit) */
    int batch_limit;             /* --max-batch: > 0: measure at most this many sequences */
    int gen_len;                 /* --max-batch: tokens generated per sequence */
    struct store *db;            /* NULL: print only */
    FILE *out;
};

/* "fullkv,rkv" x "1024" -> FullKV once, then every other spec at every
 * budget (a spec that never evicts runs once, without one); checks that each
 * opens for the session's model.  0, or -1 with e set. */
int bench_policy_list(struct session *s, const char *specs, const char *budgets,
                      struct bench_policy *out, int max, int *n, struct eb_err *e);

/* Every context x batch x kv type x policy point, after checking that no
 * context exceeds the model's maximum positions. */
int bench_contexts(struct session *s, const struct bench_long_opts *o, struct eb_err *e);

/* For each policy, the largest batch whose K+V at o->gen_len generated tokens
 * (after o->src_len prompt tokens) fits in o->kv_cap bytes, and the decode
 * rate at the batches of o->batches below it (none: 1, 2, 4, ...) and at it
 * (bench_maxbatch.c). */
int bench_max_batch(struct session *s, const struct bench_long_opts *o, struct eb_err *e);

/* One row: printed, and written when o->db (bench_long.c). */
struct bench_point;
struct bench_result;
int bench_emit(const struct bench_long_opts *o, const char *kind, const char *fill,
               const struct bench_point *p, const struct bench_result *r, size_t kv_cap,
               struct eb_err *e);

#endif
