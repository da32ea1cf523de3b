/* runner_fidelity.c - fidelity mode of the runner.  See runner_priv.h. */
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
#include "util/clock.h"

/* Fidelity mode: every problem's FullKV greedy trace replayed under the
 * point's policy with teacher forcing (session_generate's teacher option,
 * session_teacher.c).  One sequence at a time; batch size and batching do not
 * apply.  The sample's correct/pred grade the FullKV trace. */

/* Replay item i; the sample's comparison fields from the teacher. */
static int fidelity_item(struct runner *r, struct session_policy *pp, const struct runner_item *it,
                         enum kv_type kv, int max_new, struct gen_result *g, struct seq_meas *ms,
                         double *kl,
                         double *agree, int64_t *first_div, struct eb_err *e)
{
    const struct model *m = r->s.m;
    struct meas_ctx mc;
    memset(&mc, 0, sizeof mc);
    mc.seq = ms;
    mc.token_bytes =
        (size_t)m->cfg.n_layer * m->cfg.n_head_kv * m->cfg.head_dim * 2 * kv_type_bytes(kv);
    struct gen_hooks mine = {.ctx = &mc, .begin_sequence = meas_begin, .on_step = meas_step,
                             .end_sequence = meas_end};
    struct gen_request req = {it->prompt, it->n_prompt, max_new, sampler_params_greedy()};
    struct session_teacher t = {kl, agree, first_div};
    struct session_gen_opts so = {.hooks = &mine, .policy = pp, .teacher = &t, .kv_type = kv};
    return session_generate(&r->s, &req, 1, &so, g, NULL, e);
}

int run_fidelity(struct runner *r, const struct exp_config *cfg, const struct point *pt,
                        const struct runner_item *items, int n, struct run_output *out,
                        struct eb_err *e)
{
    memset(out, 0, sizeof *out);
    double t0 = clock_now_s();
    const char *grader = point_grader(pt);
    struct session_policy pp;
    if (point_policy_open(&pp, r, cfg, pt, e)) return -1;
    out->samples = eb_calloc((size_t)n, sizeof *out->samples, e);
    if (!out->samples) { session_policy_close(&pp); return -1; }
    run_record_of_point(&out->run, r, cfg, pt);
    struct runner_progress prog;
    memset(&prog, 0, sizeof prog);
    char label[512];
    sweep_point_label(pt, label, sizeof label);
    prog.label = label;
    prog.n_samples = n;
    prog.event = "batch";
    long gen_tokens = 0;
    size_t peak = 0;
    int rc = -1;
    for (int i = 0; i < n; i++) {
        struct gen_result g;
        struct seq_meas ms;
        double kl = 0, agree = 0;
        int64_t first_div = STORE_NONE;
        int max_new = cfg->max_new_tokens;
        if (cfg->max_total_tokens && cfg->max_total_tokens - items[i].n_prompt < max_new)
            max_new = cfg->max_total_tokens - items[i].n_prompt > 0 ? cfg->max_total_tokens - items[i].n_prompt : 1;
        struct eb_err fe = {0};
        if (fidelity_item(r, &pp, &items[i], pt->kv_type, max_new, &g, &ms, &kl, &agree,
                          &first_div, &fe)) {
            set_error(out, fe.msg);
            break;
        }
        struct sample_record *s = &out->samples[i];
        sample_record_init(s);
        s->sample_idx = i;
        int frc = fill_sample(r, out, s, &items[i], grader, prompt_opens_think(r, cfg), &g, &ms, e);
        gen_tokens += g.n_tokens;
        if (g.peak_kv_bytes > peak) peak = g.peak_kv_bytes;
        free(g.tokens);
        if (frc) goto fail;
        s->kl_mean = kl;
        s->top1_agree = agree;
        s->first_divergence = first_div >= 0 ? first_div : STORE_NONE;
        sample_trace_stats(&pp, 0, s);
        if (sample_sentences(&pp, 0, i, out, e)) goto fail;
        s->ttft_ms = NAN; /* timings of a replay mean nothing */
        s->tpot_ms = NAN;
        prog.samples_done = i + 1;
        prog.gen_tokens = gen_tokens;
        prog.elapsed_s = clock_now_s() - t0;
        report(r, &prog);
        if (r->o.stop && *r->o.stop && i + 1 < n) { rc = 1; goto fail; }
    }
    out->n_samples = strcmp(out->run.status, "ok") ? 0 : n;
    if (!out->n_samples) out->n_sents = 0;
    out->run.wall_s = clock_now_s() - t0;
    out->run.gen_tokens = gen_tokens;
    out->run.peak_kv_bytes = (int64_t)peak;
    if (!(out->run.params_json = own(out, stored_params(pt, pp.spec, 0)))) {
        eb_fail(e, "out of memory");
        goto fail;
    }
    session_policy_close(&pp);
    return 0;
fail:
    session_policy_close(&pp);
    run_output_free(out);
    return rc;
}
