/* bench_policies.h - the policy table of `evictbench bench`: decode tokens/s,
 * per-step policy overhead and KV memory of each eviction policy at several
 * budgets, against FullKV. */
#ifndef EB_BENCH_POLICIES_H
#define EB_BENCH_POLICIES_H

#include <stdio.h>

#include "model/model.h"
#include "util/err.h"

/* policies: comma-separated specs (e.g. "fullkv,rkv,h2o-rkv"); budgets:
 * comma-separated integers ("256,512,1024").  Each row generates n_new
 * tokens (EOS ignored, greedy) after a prompt of prompt_len tokens, one
 * sequence at a time.  FullKV runs once, as the reference for memory.
 * base (NULL: the model's shape only) adds what sentence and steering
 * policies read (seal, skipkv): tokenizer, name, steering identity and
 * vector file (policies/policy.h). */
struct policy_model;
int bench_policies_for(const struct model *m, const struct policy_model *base,
                       const char *policies, const char *budgets, int n_new, int prompt_len,
                       FILE *out, struct eb_err *e);

#endif
