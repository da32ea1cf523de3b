/* policy_schedule.h - when the glue lets a policy select (specs/policies.md
 * §1.2), and the state the released scripts carry from one sample to the next.
 *
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
 * begins while another is live is an error. */
#ifndef EB_POLICY_SCHEDULE_H
#define EB_POLICY_SCHEDULE_H

#include "policies/policy.h"
#include "util/err.h"

/* Across the sequences of one policy instance. */
struct sched_run {
    enum policy_schedule schedule;
    int divide, carry_flag, carry_count;
    long count;              /* carry_count: tokens processed by the finished sequences */
    int flag;                /* carry_flag: the last finished sequence left the count divisible */
    int n_begun, n_live;
};

/* One sequence. */
struct sched_seq {
    long count0;             /* the count when it began (0 unless carry_count) */
    long processed;          /* tokens its forwards processed so far, left pads included */
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

#endif
