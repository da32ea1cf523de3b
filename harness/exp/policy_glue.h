/* policy_glue.h - runs an eviction policy inside generate().
 *
 * The glue turns the generation hooks of model/ into the policy's views:
 * after every sampled token it lets the policy observe, decides from the
 * policy's schedule (policies/schedule.h) whether to select (specs/policies.md §1.2: budget B
 * counts the window; at prefill when the prompt holds >= B tokens, using the
 * last w prompt queries; then at the step whose forward follows a token
 * count divisible by divide_length, once a head holds >= B slots; the
 * compressing step's attention has already seen the uncompressed cache),
 * checks the keep-sets (duplicate or out-of-range slot: an error), compacts
 * the cache through kvcache_compact and counts what it did. */
#ifndef EB_POLICY_GLUE_H
#define EB_POLICY_GLUE_H

#include <stddef.h>

#include "model/generate.h"
#include "policies/policy.h"
#include "policies/schedule.h"  /* policy_check_budget, the schedule and the slot limit */

struct policy_glue;

struct policy_glue_stats {
    long steps;              /* sampled tokens seen */
    long selections;         /* select calls */
    long compressions;       /* selections that evicted at least one slot */
    long evicted_slots;      /* (layer, kv head) slots evicted */
    double evicted_tokens;   /* evicted_slots / (n_layer * n_kv) */
    double policy_s;         /* wall time spent in the policy and this glue */
    /* policy_s's compressions, split: scoring, top-k and compaction (with
     * policy_glue_time_phases on, the backend is waited for at each
     * boundary, so the times are the device's too).  A policy that selects
     * per sequence counts its whole select in select_s. */
    double score_s, select_s, compact_s;
    /* The batch's compressions (one per forward pass that compressed any
     * sequence together, policy_batch.c) and their backend calls: calls /
     * batch_compressions is "backend calls per compression", the same at
     * any batch size (0 unless the backend counts calls). */
    long batch_compressions;
    unsigned long long compress_calls;
    size_t peak_kv_bytes;    /* largest peak of any sequence's cache */
    double mean_kv_bytes;    /* mean over steps of the stepping sequence's KV bytes, as its
                                forward saw them (before any compaction) */
    int max_slots;           /* most slots any head held after a forward */
};

/* The model's shape as a policy sees it (tokenizer and names left NULL),
 * from a loaded model or from a model file's config before loading. */
struct policy_model policy_model_of(const struct model *m);
struct policy_model policy_model_of_config(const struct model_config *cfg);

/* p is borrowed and must outlive the glue. */
int policy_glue_create(struct policy *p, int budget, const struct model *m,
                       struct policy_glue **out, struct eb_err *e);
void policy_glue_free(struct policy_glue *g);

/* Hooks that run the policy and then inner's callbacks (inner may be NULL;
 * its model hooks and query window are not used).  g and inner must outlive
 * the generate() call. */
void policy_glue_hooks(struct policy_glue *g, const struct gen_hooks *inner,
                       struct gen_hooks *out);

void policy_glue_stats(const struct policy_glue *g, struct policy_glue_stats *out);

/* The batch's compression: hooks.after_step runs it once per forward pass
 * for every sequence whose on_step found it due.  A caller that drives the
 * hooks itself (teacher forcing, decode_compare) calls this after each
 * step's on_steps, or hooks.after_step.  0, or -1 with e set. */
int policy_glue_flush(struct policy_glue *g, struct eb_err *e);

/* on = 0: every selection per sequence in on_step, as before batching
 * (tests compare the two); 1 (the default): batched where the policy and the
 * backend can. */
void policy_glue_set_batch(struct policy_glue *g, int on);
/* on = 1: wait for the backend (be->sync) at the score / select / compact
 * boundaries so policy_glue_stats's split is real on a device. */
void policy_glue_time_phases(struct policy_glue *g, int on);

/* Bytes of backend memory the batched compression may allocate (be->alloc)
 * for n_live sequences in flight whose caches hold at most max_slots slots
 * per head (their capacity), at this budget: unit descriptors, score rows,
 * keep indices, gather descriptors and the gather's staging.  0 for a
 * policy that never batches. */
struct model_config;
size_t policy_glue_scratch_bytes(const struct policy *p, int budget,
                                 const struct model_config *c, int n_live, int max_slots);

/* The token-retention record (harness/exp/retention.h): on (1) it notes every
 * position each compaction evicts, per (layer, KV head), from the next
 * sequence that begins; policy_glue_retention is NULL while it is off. */
struct retention;
int policy_glue_record_retention(struct policy_glue *g, int on, struct eb_err *e);
struct retention *policy_glue_retention(struct policy_glue *g);

#endif
