/* point_policy.c - a point's policy: resolve, open with its model defaults,
 * read its trace statistics.  See runner_priv.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "kernels/backend.h"
#include "model/generate.h"
#include "policies/steering.h"
#include "harness/grade/grade.h"
#include "harness/exp/runner_priv.h"

/* {"name": policy, ...params} parsed by the registry. */
static int policy_lookup(const char *policy, const char *params_json,
                         const struct policy_entry **entry, struct policy_params *pp,
                         struct eb_err *e)
{
    cJSON *o = cJSON_Parse(params_json && params_json[0] ? params_json : "{}");
    if (!o || !cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return eb_fail(e, "policy parameters are not a JSON object");
    }
    cJSON_DeleteItemFromObjectCaseSensitive(o, "name");
    if (!cJSON_AddStringToObject(o, "name", policy)) {
        cJSON_Delete(o);
        return eb_fail(e, "out of memory");
    }
    int rc = policy_parse_json(o, entry, pp, e);
    cJSON_Delete(o);
    return rc;
}

int runner_policy_check(const char *policy, const char *params_json, struct eb_err *e)
{
    const struct policy_entry *entry;
    struct policy_params pp;
    return policy_lookup(policy, params_json, &entry, &pp, e);
}

int point_policy_open(struct session_policy *pp, const struct runner *r,
                      const struct exp_config *cfg, const struct sweep_point *pt,
                      struct eb_err *e)
{
    memset(pp, 0, sizeof *pp);
    const struct policy_entry *entry;
    struct policy_params params;
    if (policy_lookup(pt->policy, pt->params_json, &entry, &params, e)) return -1;
    if (pt->budget > INT32_MAX) return eb_fail(e, "budget %lld is too large", (long long)pt->budget);
    struct policy_request rq = {entry, &params, (int)(pt->budget > 0 ? pt->budget : 0),
                                cfg->steer_vector, 0};
    return session_policy_open(&r->s, &rq, pp, e);
}

/* The policy's statistics of trace seq (the sequence id within the generate
 * call) into the sample: sentences, N_o and the final steering coefficient
 * when the policy tracks them (seal, skipkv and their presets), PSS pairs
 * only when it also builds sentence representations (it observes the
 * hidden states); otherwise the fields stay NULL ("not measured"). */
void sample_trace_stats(const struct session_policy *pp, int seq, struct sample_record *s)
{
    struct policy_trace_stats st;
    if (!pp->pol || policy_trace_stats(pp->pol, seq, &st) || !st.valid) return;
    s->n_sentences = st.s.n_sentences;
    s->n_nonexec = st.s.n_check;
    if (st.alpha != 0.0) s->steer_alpha_final = st.alpha;
    if (!(pp->pol->info.needs & POLICY_NEED_HIDDEN_LAST)) return;
    s->n_redundant_pairs = st.s.n_pairs_above;
    if (st.s.n_pairs > 0) {
        s->pss_mean = st.s.pss_mean;
        s->pss_max = st.s.pss_max;
    }
}

/* The policy's sentences of trace seq as rows of sample sample_idx, appended
 * to o->sents: under the policies that keep sentences (seal, skipkv and their
 * presets), one row per closed sentence, prompt included; none otherwise. */
int sample_sentences(const struct session_policy *pp, int seq, int64_t sample_idx,
                            struct run_output *o, struct eb_err *e)
{
    if (!pp->pol) return 0;
    struct sent_info *v = NULL;
    int n = 0;
    int rc = policy_trace_sentences(pp->pol, seq, &v, &n, e);
    if (rc) return rc < 0 ? eb_wrap(e, "sentences") : 0;
    if (o->n_sents + n > o->cap_sents) {
        int cap = o->cap_sents ? o->cap_sents : 256;
        while (cap < o->n_sents + n) cap *= 2;
        struct sentence_record *ns = realloc(o->sents, (size_t)cap * sizeof *ns);
        if (!ns) {
            free(v);
            return eb_fail_nomem(e, "out of memory for %d sentence rows", cap);
        }
        o->sents = ns;
        o->cap_sents = cap;
    }
    for (int i = 0; i < n; i++) {
        struct sentence_record *x = &o->sents[o->n_sents++];
        sentence_record_init(x);
        x->sample_idx = sample_idx;
        x->sent_idx = i;
        x->start_tok = v[i].start;
        x->end_tok = v[i].end;
        x->kind = sent_label_name(v[i].label);
        x->max_sim = v[i].max_sim;
        x->evicted_step = v[i].evicted_step >= 0 ? v[i].evicted_step : STORE_NONE;
    }
    free(v);
    return 0;
}
