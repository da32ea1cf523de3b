/* runner_retention.c - a sample's token-retention record, from the policy
 * glue's recorder to the sample row (see harness/exp/retention.h). */
#include <stdlib.h>
#include <string.h>

#include "harness/exp/retention.h"
#include "harness/exp/runner_priv.h"

int sample_retention(const struct session_policy *pp, int seq, const struct runner *r,
                     const struct gen_result *g, struct run_output *o, struct sample_record *s,
                     struct eb_err *e)
{
    struct retention *rec = pp->glue ? policy_glue_retention(pp->glue) : NULL;
    if (!rec) return 0;
    struct retention_blob b;
    if (retention_encode(rec, seq, g->n_tokens, r->s.tok, g->tokens, s->text ? strlen(s->text) : 0,
                         &b, e))
        return -1;
    /* one block the run output owns: the row, then the two blobs */
    struct sample_retention *x = malloc(sizeof *x + b.steps_len + b.token_bytes_len);
    if (!x || !own(o, (char *)x)) {
        retention_blob_free(&b);
        return eb_fail_nomem(e, "retention record");
    }
    unsigned char *steps = (unsigned char *)(x + 1);
    memcpy(steps, b.steps, b.steps_len);
    if (b.token_bytes) memcpy(steps + b.steps_len, b.token_bytes, b.token_bytes_len);
    *x = (struct sample_retention){b.n_layer, b.n_kv, b.n_prompt, b.n_positions,
                                   b.n_evicted_slots, b.n_evicted_tokens, b.max_step,
                                   RETENTION_ENCODING, steps, b.steps_len,
                                   b.token_bytes ? steps + b.steps_len : NULL, b.token_bytes_len};
    retention_blob_free(&b);
    s->retention = x;
    return 0;
}
