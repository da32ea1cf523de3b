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

/* ---- fidelity mode ----
 * For each problem, the FullKV greedy trace is replayed under the policy with
 * teacher forcing: both caches are fed the same (FullKV) tokens, and at every
 * step the two next-token distributions are compared.  KL(FullKV || policy)
 * averaged over steps, the fraction of steps whose argmax agrees, and the
 * first step where it does not, which is where free-running greedy decoding
 * under the policy would leave the FullKV trace (before it, both histories
 * are the same).  One sequence at a time; batch size and batching do not
 * apply.  The sample's correct/pred grade the FullKV trace. */

static int argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* KL(softmax(p) || softmax(q)) over the first n logits. */
static double kl_logits(const float *p, const float *q, int n)
{
    double mp = p[argmax(p, n)], mq = q[argmax(q, n)], zp = 0, zq = 0;
    for (int i = 0; i < n; i++) {
        zp += exp((double)p[i] - mp);
        zq += exp((double)q[i] - mq);
    }
    double lzp = mp + log(zp), lzq = mq + log(zq), kl = 0;
    for (int i = 0; i < n; i++) {
        double lp = (double)p[i] - lzp, lq = (double)q[i] - lzq;
        kl += exp(lp) * (lp - lq);
    }
    return kl > 0 ? kl : 0;
}

static int is_eos_id(const struct model *m, int tok)
{
    for (int i = 0; i < m->cfg.n_eos; i++)
        if (m->cfg.eos_ids[i] == tok) return 1;
    return 0;
}

/* One forward of n tokens on one cache; logits of the last row into out. */
static int forward_one(struct forward *f, struct kvcache *c, const int *toks, int n,
                       const struct model_hooks *h, float *out, int n_vocab, struct eb_err *e)
{
    struct fwd_seq fs = {.id = 0, .cache = c, .tokens = toks, .n_tokens = n,
                         .logits = FWD_LOGITS_LAST};
    struct fwd_batch b = {&fs, 1, 0};
    if (model_forward(f, &b, h, e)) return -1;
    memcpy(out, forward_logits(f) + (size_t)fs.logit_row0 * n_vocab, (size_t)n_vocab * sizeof *out);
    return 0;
}

static int fidelity_one(struct runner *r, struct point_policy *pp, const struct runner_item *it,
                        int max_new, struct gen_result *g, double *kl_mean, double *agree,
                        int64_t *first_div, struct seq_meas *ms, struct eb_err *e)
{
    const struct model *m = r->m;
    int nv = m->cfg.n_vocab, nvalid = r->tok ? tokenizer_n_vocab(r->tok) : nv;
    if (nvalid > nv || nvalid < 1) nvalid = nv;
    struct kvcache *cf = NULL, *cp = NULL;
    struct forward *f = NULL;
    float *lf = eb_malloc((size_t)nv * sizeof *lf, e), *lp = eb_malloc((size_t)nv * sizeof *lp, e);
    int rc = -1, cap = it->n_prompt + max_new;
    if (cap > m->cfg.n_ctx_train && m->cfg.n_ctx_train > 0) {
        max_new = m->cfg.n_ctx_train - it->n_prompt;
        cap = m->cfg.n_ctx_train;
    }
    memset(g, 0, sizeof *g);
    if (max_new < 1) { eb_fail(e, "prompt of %d tokens leaves no room in the context", it->n_prompt); goto out; }
    g->tokens = eb_malloc((size_t)max_new * sizeof *g->tokens, e);
    if (!lf || !lp || !g->tokens) goto out;
    if (forward_create(m, it->n_prompt, 1, &f, e) || model_kvcache_create(m, cap, &cf, e) ||
        model_kvcache_create(m, cap, &cp, e))
        goto out;
    struct meas_ctx mc;
    memset(&mc, 0, sizeof mc);
    mc.seq = ms;
    mc.token_bytes = (size_t)m->cfg.n_layer * m->cfg.n_head_kv * m->cfg.head_dim * 2 * sizeof(float);
    struct gen_hooks mine, h;
    memset(&mine, 0, sizeof mine);
    mine.ctx = &mc;
    mine.begin_sequence = meas_begin;
    mine.on_step = meas_step;
    point_policy_hooks(pp, &mine, &h);
    if (h.recent_q_window > 0 &&
        kvcache_qring_enable(cp, h.recent_q_window, m->cfg.n_head * m->cfg.head_dim, e))
        goto out;
    struct gen_request req = {it->prompt, it->n_prompt, max_new, sampler_params_greedy()};
    if (h.begin_sequence && h.begin_sequence(h.ctx, 0, &req, cp, e)) goto out;
    if (forward_one(f, cf, it->prompt, it->n_prompt, NULL, lf, nv, e) ||
        forward_one(f, cp, it->prompt, it->n_prompt, h.model, lp, nv, e))
        goto out;
    double kl_sum = 0;
    long agree_n = 0, steps = 0;
    *first_div = STORE_NONE;
    for (;;) {
        int ref = argmax(lf, nvalid);
        kl_sum += kl_logits(lf, lp, nvalid);
        if (argmax(lp, nvalid) == ref) agree_n++;
        else if (*first_div < 0) *first_div = steps;
        steps++;
        if (h.on_step && h.on_step(h.ctx, 0, ref, cp, e)) goto out;
        if (is_eos_id(m, ref)) { g->finish = GEN_FINISH_EOS; break; }
        g->tokens[g->n_tokens++] = ref;
        if (g->n_tokens >= max_new) { g->finish = GEN_FINISH_LENGTH; break; }
        if (forward_one(f, cf, &ref, 1, NULL, lf, nv, e) ||
            forward_one(f, cp, &ref, 1, h.model, lp, nv, e))
            goto out;
    }
    g->peak_kv_bytes = cp->peak_bytes;
    if (h.end_sequence) h.end_sequence(h.ctx, 0, g);
    *kl_mean = kl_sum / (double)steps;
    *agree = (double)agree_n / (double)steps;
    rc = 0;
out:
    if (rc) { free(g->tokens); g->tokens = NULL; }
    kvcache_free(cf);
    kvcache_free(cp);
    forward_free(f);
    free(lf);
    free(lp);
    return rc;
}

int run_fidelity(struct runner *r, const struct exp_config *cfg, const struct sweep_point *pt,
                        const struct runner_item *items, int n, struct run_output *out,
                        struct eb_err *e)
{
    memset(out, 0, sizeof *out);
    double t0 = clock_now_s();
    const struct dataset_spec *dspec = dataset_find(pt->dataset, NULL);
    const char *grader = dspec ? dspec->grader : "math";
    struct point_policy pp;
    if (point_policy_open(&pp, r, cfg, pt->policy, pt->params_json, pt->budget, e)) return -1;
    out->samples = eb_calloc((size_t)n, sizeof *out->samples, e);
    if (!out->samples) { point_policy_close(&pp); return -1; }
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
        if (fidelity_one(r, &pp, &items[i], max_new, &g, &kl, &agree, &first_div, &ms, &fe)) {
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
        s->first_divergence = first_div;
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
    if (!(out->run.params_json = own(out, stored_params(cfg, pt, pp.spec, 0)))) {
        eb_fail(e, "out of memory");
        goto fail;
    }
    point_policy_close(&pp);
    return 0;
fail:
    point_policy_close(&pp);
    run_output_free(out);
    return rc;
}
