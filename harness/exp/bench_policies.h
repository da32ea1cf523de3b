/* bench_policies.h - the policy table of `evictbench bench`: decode tokens/s,
 * per-step policy overhead and KV memory of each eviction policy at several
 * budgets, against FullKV. */
#ifndef EB_BENCH_POLICIES_H
#define EB_BENCH_POLICIES_H

#include <stdio.h>

#include "harness/exp/session.h"
#include "model/model.h"
#include "util/err.h"

/* policies: comma-separated specs (e.g. "fullkv,rkv,h2o-rkv"); budgets:
 * comma-separated integers ("256,512,1024").  Each row generates n_new
 * tokens (EOS ignored, greedy) after a prompt of prompt_len tokens, one
 * sequence at a time, with the session's loaded model (its tokenizer and
 * name are what the sentence and steering policies read).  FullKV runs
 * once, as the reference for memory.  Caches hold kv_type elements. */
int bench_policies_for(struct session *s, const char *policies, const char *budgets, int n_new,
                       int prompt_len, enum kv_type kv_type, FILE *out, struct eb_err *e);

#endif
