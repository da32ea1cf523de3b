/* follow_hooks.h - the policy hooks that only pass a call on to a follower
 * (follow.h): a policy whose state struct BEGINS with its struct follower
 * (SEAL, SkipKV) names these in its vtable instead of writing its own
 * one-line wrappers (a pointer to a struct, converted, points to its first
 * member). */
#ifndef EB_POLICY_FOLLOW_HOOKS_H
#define EB_POLICY_FOLLOW_HOOKS_H

#include "follow.h"

int follow_hook_begin(void *self, int seq, const struct seq_view *sv, struct eb_err *e);
void follow_hook_end(void *self, int seq);
int follow_hook_steer(void *self, int seq, int layer, struct backend *be, float *hidden,
                      int n_rows, int dim, struct eb_err *e);
int follow_hook_trace_stats(const void *self, int seq, struct policy_trace_stats *out);
int follow_hook_trace_sentences(const void *self, int seq, struct sent_info **out, int *n,
                                struct eb_err *e);

#endif
