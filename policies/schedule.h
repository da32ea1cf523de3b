/* schedule.h - when a policy compresses and how many cache slots it needs:
 * pure arithmetic on its policy_info and the budget, shared by whoever runs a
 * policy (harness/exp/policy_glue.c) and testable without a model
 * (tests/test_schedule.c).  specs/policies.md §1.2 defines the schedules. */
#ifndef EB_POLICY_SCHEDULE_H
#define EB_POLICY_SCHEDULE_H

#include "policy.h"

/* The info a policy's create filled in is usable: the needs have their
 * parameters (a query window of >= 1 rows, a divide_length >= 1).  name is
 * the policy's, for the message. */
int policy_info_check(const struct policy_info *in, const char *name, struct eb_err *e);

/* The one budget check: a policy that evicts nothing (keeps_all) takes any
 * budget >= 0 (POLICY_NO_BUDGET: none given); any other needs one > 0, above
 * its window (window < 0: not known yet, before create) and passing its
 * ops->check_budget on params (ops or its check NULL: skipped).  name (or
 * NULL) names the policy in messages.  Before an instance:
 * policy_entry_budget_check (registry.h). */
int policy_budget_check(const char *name, const struct policy_ops *ops,
                        const struct policy_params *params, int keeps_all, int window, int budget,
                        struct eb_err *e);
/* The same for an instance (its schedule says whether it evicts). */
int policy_check_budget(const struct policy *p, int budget, struct eb_err *e);
/* Whether select runs after the forward that has just processed a sequence's
 * token number n_seen (1-based: tokens that have entered its cache, left pads
 * included, the released code counts them; specs/policies.md §9.1 item 2).
 * at_prefill: that forward was the prompt's.  POLICY_DIVIDE follows the
 * reference: it sets its flag when the token count is divisible by
 * divide_length and compresses in the next forward, the one that processed
 * token n_seen = count + 1.  POLICY_DECODING counts from the prompt's end:
 * n_seen is then the tokens processed since the prompt (sched_step passes
 * that), and a forward selects when it is a multiple of divide_length. */
int policy_compresses_at(const struct policy_info *in, int at_prefill, long n_seen);

/* Most slots a head can hold once the prompt is in, for a budget: each
 * selection brings it back to the budget, and between selections at most one
 * schedule period of tokens arrives (one more for the token appended before
 * the step's hook runs); every-step policies that compact only now and then
 * add their slot_slack.  0: no bound (a policy that does not evict during
 * decode, or RPC's growing budget, slot_slack -1). */
int policy_slot_limit(const struct policy_info *in, int budget);

/* ---- the schedule over the sequences of one policy instance ----
 * POLICY_DIVIDE counts tokens as the released modeling.py does (its `length`,
 * left pads included): a forward that ends with the count divisible by
 * divide_length sets the step flag, and the next forward compresses.  By
 * default each sequence starts afresh: its prefill always selects and its
 * count starts at 0.  With policy_info.divide_carry_flag the flag the previous
 * sequence's last forward left decides the next prefill (the first sequence
 * of the instance always selects: the released flag starts as None), and
 * with divide_carry_count the count runs on across sequences (R-KV's
 * modeling.py never resets `self.length`; SkipKV's reset_for_new_sample
 * does, but not the flag).  Carrying needs the sequences one after another,
 * as the released scripts run them with eval_batch_size 1: a sequence that
 * begins while another is live is an error.  With POLICY_DECODING
 * (kvpress's DecodingPress: decoding_press.py forward_hook) the prompt's
 * forward neither selects nor counts, and the forward that ends decoding step
 * m (m = tokens processed since the prompt) selects when m is a multiple of
 * divide_length.  POLICY_PREFILL_DECODING (PrefillDecodingPress) selects at
 * the prompt's forward too, and counts as POLICY_DECODING after it.  The
 * glue (harness/exp) holds these structs; the functions
 * are plain arithmetic on them. */

/* Across the sequences of one policy instance. */
struct sched_run {
    struct policy_info info;
    int divide, carry_flag, carry_count, decode_only;
    int from_prompt;         /* decoding counts from the prompt's end (DECODING, PREFILL_DECODING) */
    long count;              /* carry_count: tokens processed by the finished sequences */
    int flag;                /* carry_flag: the last finished sequence left the count divisible */
    int n_begun, n_live;
};

/* One sequence. */
struct sched_seq {
    long count0;             /* the count when it began (0 unless carry_count) */
    long processed;          /* tokens its forwards processed so far, left pads included */
    long prompt_processed;   /* of them, by the prompt's forward (from_prompt) */
    int prefill_selects;
    int live;
};

void sched_run_init(struct sched_run *r, const struct policy_info *in);
/* A sequence begins (its cache is empty). */
int sched_begin(struct sched_run *r, struct sched_seq *s, const char *policy, struct eb_err *e);
/* After a forward: `processed` tokens (left pads included) are in the cache;
 * 1 if the policy selects now. */
int sched_step(const struct sched_run *r, struct sched_seq *s, long processed, int at_prefill);
/* After a forward that processed `processed` tokens: 1 if the next forward
 * selects (the released step flag this forward leaves). */
int sched_selects_next(const struct sched_run *r, const struct sched_seq *s, long processed);
/* The sequence finished. */
void sched_end(struct sched_run *r, struct sched_seq *s);
/* policy_slot_limit for this run: no bound where a carried flag or
 * POLICY_DECODING may leave a prompt uncompressed. */
int sched_slot_limit(const struct sched_run *r, int budget);

#endif
