/* follow_hooks.c - vtable hooks that pass the call on to the struct follower
 * at the start of the policy's state (follow_hooks.h). */
#include "follow_hooks.h"

int follow_hook_begin(void *self, int seq, const struct seq_view *sv, struct eb_err *e)
{
    return follower_begin(self, seq, sv, e);
}

void follow_hook_end(void *self, int seq)
{
    follower_end(self, seq);
}

int follow_hook_steer(void *self, int seq, int layer, struct backend *be, float *hidden,
                      int n_rows, int dim, struct eb_err *e)
{
    return follower_steer(self, seq, layer, be, hidden, n_rows, dim, e);
}

int follow_hook_trace_stats(const void *self, int seq, struct policy_trace_stats *out)
{
    return follower_trace_stats(self, seq, out);
}

int follow_hook_trace_sentences(const void *self, int seq, struct sent_info **out, int *n,
                                struct eb_err *e)
{
    return follower_trace_sentences(self, seq, out, n, e);
}
