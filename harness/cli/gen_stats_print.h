/* gen_stats_print.h - what `evictbench generate --stats` prints after a run
 * (gen_stats_print.c): prefill and decode speed, host against device time,
 * step graphs, KV memory, threads, backend calls, the policy's work and its
 * sentence/steering traces, all on stderr. */
#ifndef EB_GEN_STATS_PRINT_H
#define EB_GEN_STATS_PRINT_H

#include "model/generate.h"
#include "harness/exp/policy_glue.h"

struct gen_print_ctx {
    const char *device;         /* --device; NULL: cpu */
    const char *kv_name;        /* the KV caches' element type */
    long budget;
    struct policy_glue *glue;   /* NULL: no policy */
    const struct policy *pol;
    int n_layer;
};

void gen_print_stats(const struct gen_stats *st, const struct gen_result *res, int n,
                     const struct gen_print_ctx *c);

#endif
