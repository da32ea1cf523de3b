/* point_policy.c - a point's policy: resolve, open with its model defaults,
 * wire to the generation hooks, read its trace statistics.  See runner_priv.h. */
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

int point_policy_open(struct point_policy *pp, const struct runner *r,
                             const struct exp_config *cfg, const char *policy,
                             const char *params_json, int64_t budget, struct eb_err *e)
{
    const struct model *m = r->m;
    memset(pp, 0, sizeof *pp);
    const struct policy_entry *entry;
    struct policy_params params;
    if (policy_lookup(policy, params_json, &entry, &params, e)) return -1;
    policy_params_format(entry, &params, pp->spec, sizeof pp->spec);
    if (!strcmp(entry->name, "fullkv")) return 0;
    /* What the sentence and steering policies read: the tokenizer (NULL for
     * the tiny test models: those policies then fail clearly), the model's
     * name (default vector vectors/<name>.bin) and identity, the config's
     * vector file. */
    struct policy_model pm = policy_model_of(m);
    pm.tok = r->tok;
    pm.model_name = r->model_name;
    pm.steer_vector = cfg->steer_vector;
    if (steering_model_identity(&m->cfg, pp->identity, sizeof pp->identity, e)) return -1;
    pm.model_identity = pp->identity;
    if (budget > INT32_MAX) return eb_fail(e, "budget %lld is too large", (long long)budget);
    if (policy_instantiate(entry, &params, &pm, &pp->pol, e) ||
        policy_check_budget(pp->pol, (int)(budget > 0 ? budget : 0), e) ||
        policy_glue_create(pp->pol, (int)(budget > 0 ? budget : 0), m, &pp->glue, e)) {
        policy_glue_free(pp->glue);
        policy_free(pp->pol);
        memset(pp, 0, sizeof *pp);
        return -1;
    }
    return 0;
}

/* The policy's statistics of trace seq (the sequence id within the generate
 * call) into the sample: sentences, N_o and the final steering coefficient
 * when the policy tracks them (seal, skipkv and their presets), PSS pairs
 * only when it also builds sentence representations (it observes the
 * hidden states); otherwise the fields stay NULL ("not measured"). */
void sample_trace_stats(const struct point_policy *pp, int seq, struct sample_record *s)
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
int sample_sentences(const struct point_policy *pp, int seq, int64_t sample_idx,
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

/* The hooks generate() gets: the policy's (when any) around the runner's own. */
void point_policy_hooks(struct point_policy *pp, const struct gen_hooks *mine,
                               struct gen_hooks *out)
{
    if (pp->glue) policy_glue_hooks(pp->glue, mine, out);
    else *out = *mine;
}

void point_policy_close(struct point_policy *pp)
{
    policy_glue_free(pp->glue);
    policy_free(pp->pol);
    memset(pp, 0, sizeof *pp);
}
