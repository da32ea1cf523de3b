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

int point_policy_open(struct session_policy *pp, const struct runner *r,
                      const struct exp_config *cfg, const struct point *pt,
                      struct eb_err *e)
{
    memset(pp, 0, sizeof *pp);
    struct policy_request rq = {pt->policy, &pt->params, pt->budget, cfg->steer_vector, 0};
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
