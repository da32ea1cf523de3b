/* session_policy.c - open a policy for a model: defaults -> create -> budget
 * check -> glue -> hooks (see session.h).  The one copy of that sequence:
 * the runner, generate, bench and the tests use it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/exp/policy_defaults.h"
#include "harness/exp/session.h"
#include "policies/steering.h"

int session_policy_resolve(const char *spec, const char *model, const char *dataset,
                           int budget, int no_defaults, const struct policy_entry **entry,
                           struct policy_params *params, struct eb_err *e)
{
    char *full = NULL;
    if (no_defaults) full = strdup(spec);
    else if (policy_defaults_apply_spec(spec, model, dataset, budget, &full, e)) return -1;
    if (!full) return eb_fail(e, "out of memory");
    int rc = policy_parse(full, entry, params, e);
    free(full);
    return rc;
}

int policy_target_open(const struct policy_target *t, const struct policy_request *rq,
                       struct session_policy *out, struct eb_err *e)
{
    memset(out, 0, sizeof *out);
    out->entry = rq->entry;
    out->budget = rq->budget > 0 ? rq->budget : 0;
    policy_params_format(rq->entry, rq->params, out->spec, sizeof out->spec);
    /* FullKV asks for nothing and pays nothing, unless its counters are wanted. */
    if (!strcmp(rq->entry->name, "fullkv") && !rq->keep_fullkv) return 0;
    /* What the sentence and steering policies read: the tokenizer, the
     * model's name (default vector vectors/<name>.bin) and identity, the
     * vector file. */
    struct policy_model pm = policy_model_of_config(t->cfg);
    pm.tok = t->tok;
    pm.model_name = t->model_name;
    pm.steer_vector = rq->steer_vector;
    if (steering_model_identity(t->cfg, out->identity, sizeof out->identity, e)) return -1;
    pm.model_identity = out->identity;
    if (policy_instantiate(rq->entry, rq->params, &pm, &out->pol, e) ||
        policy_check_budget(out->pol, out->budget, e) ||
        (t->m && session_policy_glue(out, t->m, e))) {
        session_policy_close(out);
        return -1;
    }
    return 0;
}

int session_policy_open(const struct session *s, const struct policy_request *rq,
                        struct session_policy *out, struct eb_err *e)
{
    struct policy_target t = {session_config(s), s->m, s->tok, s->model_name};
    if (!t.cfg) return eb_fail(e, "session: no model open");
    return policy_target_open(&t, rq, out, e);
}

int session_policy_glue(struct session_policy *sp, const struct model *m, struct eb_err *e)
{
    if (!sp->pol || sp->glue) return 0;
    return policy_glue_create(sp->pol, sp->budget, m, &sp->glue, e);
}

void session_policy_hooks(struct session_policy *sp, const struct gen_hooks *mine,
                          struct gen_hooks *out)
{
    if (sp && sp->glue) policy_glue_hooks(sp->glue, mine, out);
    else if (mine) *out = *mine;
    else memset(out, 0, sizeof *out);
}

void session_policy_close(struct session_policy *sp)
{
    policy_glue_free(sp->glue);
    policy_free(sp->pol);
    memset(sp, 0, sizeof *sp);
}
