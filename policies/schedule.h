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

/* A budget this policy can run with: > 0 and above its window (a policy that
 * never compresses: any budget >= 0; 0 means none given). */
int policy_budget_check(const struct policy_info *in, const char *name, int budget,
                        struct eb_err *e);
int policy_check_budget(const struct policy *p, int budget, struct eb_err *e);

/* Whether select runs after the forward that has just processed a sequence's
 * token number n_seen (1-based: tokens that have entered its cache, left pads
 * included, the released code counts them; specs/policies.md §9.1 item 2).
 * at_prefill: that forward was the prompt's.  POLICY_DIVIDE follows the
 * reference: it sets its flag when the token count is divisible by
 * divide_length and compresses in the next forward, the one that processed
 * token n_seen = count + 1. */
int policy_compresses_at(const struct policy_info *in, int at_prefill, long n_seen);

/* Most slots a head can hold once the prompt is in, for a budget: each
 * selection brings it back to the budget, and between selections at most one
 * schedule period of tokens arrives (one more for the token appended before
 * the step's hook runs); every-step policies that compact only now and then
 * add their slot_slack.  0: no bound (a policy that does not evict during
 * decode, or RPC's growing budget, slot_slack -1). */
int policy_slot_limit(const struct policy_info *in, int budget);

#endif
