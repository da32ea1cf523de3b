/* runner_sample.c - what the runner measures of each sequence (through the
 * generation hooks), progress reports, and one sample's graded record.
 * See runner_priv.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "harness/grade/code_grader.h"
#include "harness/grade/grade.h"
#include "harness/exp/runner_priv.h"
#include "util/clock.h"
#include "kernels/backend.h"
#include "model/generate.h"

/* ---- per-sequence measurements, taken through the generation hooks ----
 * They run after the policy's own hooks (policy_glue calls them last), so at
 * each step the cache is already compacted.  The size it had before is known:
 * the size at the previous step plus one token (the prompt at the first). */


int meas_begin(void *ctx, int seq, const struct gen_request *req, struct kvcache *cache,
                      struct eb_err *e)
{
    (void)cache; (void)e;
    struct meas_ctx *c = ctx;
    memset(&c->seq[seq], 0, sizeof c->seq[seq]);
    c->seq[seq].n_prompt = req->n_prompt;
    return 0;
}

int meas_step(void *ctx, int seq, int token, struct kvcache *cache, struct eb_err *e)
{
    (void)token;
    struct meas_ctx *c = ctx;
    struct seq_meas *s = &c->seq[seq];
    if (c->stop && *c->stop) {
        c->stopped = 1;
        return eb_fail(e, "stopped");
    }
    double t = clock_now_s();
    runner_renew_claim(c->r);
    if (s->steps == 0) s->t_first = t;
    s->t_last = t;
    c->steps++;
    size_t before = s->steps == 0 ? (size_t)s->n_prompt * c->token_bytes : s->kv_seen + c->token_bytes;
    size_t after = cache->bytes;
    s->steps++;
    if (after < before) s->compressions++;
    /* The batch total with this sequence at its size before compaction. */
    c->kv_total = c->kv_total - s->kv_seen + before;
    if (c->kv_total > c->kv_peak_seen) c->kv_peak_seen = c->kv_total;
    if (c->kv_cap && c->kv_total > c->kv_cap) {
        c->kv_exceeded = 1;
        return eb_fail(e, "the batch's KV cache reached %zu bytes, over max_kv_bytes %zu",
                       c->kv_total, c->kv_cap);
    }
    c->kv_total = c->kv_total - before + after;
    s->kv_seen = after;
    s->kv_sum += (double)after;
    c->batch_kv_sum += (double)c->kv_total;
    c->batch_kv_steps++;
    return 0;
}

void meas_end(void *ctx, int seq, const struct gen_result *res)
{
    struct meas_ctx *c = ctx;
    c->kv_total -= c->seq[seq].kv_seen;
    c->seq[seq].kv_seen = 0;
    if (c->samples_done) {
        (*c->samples_done)++;
        *c->gen_tokens += res->n_tokens;
        double t = clock_now_s();
        if (t - c->last_report >= 2.0) {
            c->last_report = t;
            struct runner_progress p = *c->prog_base;
            p.samples_done = *c->samples_done;
            p.gen_tokens = c->tokens_before + c->steps;
            p.elapsed_s = t - c->t0;
            report(c->r, &p);
        }
    }
}

/* ---- progress ---- */

void runner_renew_claim(struct runner *r)
{
    if (!r || !r->claim_st) return;
    double now = store_clock(), lease = r->o.lease_s > 0 ? r->o.lease_s : 600;
    if (now - r->claim_renewed < lease / 3) return;
    struct eb_err e = {0};
    if (store_claim(r->claim_st, r->claim_key, r->owner, lease, &e) >= 0) r->claim_renewed = now;
}

void report(struct runner *r, const struct runner_progress *in)
{
    if (!r->o.progress) return;
    struct runner_progress p = *in;
    p.point = r->point;
    p.n_points = r->n_points;
    p.tokens_per_s = p.elapsed_s > 0 ? (double)p.gen_tokens / p.elapsed_s : 0;
    p.eta_s = p.samples_done > 0 && p.samples_done < p.n_samples
                  ? p.elapsed_s * (p.n_samples - p.samples_done) / p.samples_done
                  : -1;
    int left = r->n_points - r->point;
    p.sweep_eta_s = -1;
    if (r->points_run > 0)
        p.sweep_eta_s = (p.eta_s > 0 ? p.eta_s : 0) + left * (r->points_run_s / r->points_run);
    r->o.progress(r->o.progress_ctx, &p);
}

/* ---- one sample's record ---- */

static char *ids_text(const int *ids, int n)
{
    size_t cap = (size_t)n * 12 + 1, len = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    s[0] = '\0';
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(s + len, cap - len, i ? " %d" : "%d", ids[i]);
    return s;
}

/* The R1 template ends the prompt inside <think>: everything up to
 * "</think>" is reasoning.  Only for prompts the runner rendered itself. */
int prompt_opens_think(const struct runner *r, const struct exp_config *cfg)
{
    return !r->o.items && !strcmp(cfg->prompt->chat, "r1") && r->s.think_end_id >= 0;
}

/* Grade one output with the dataset's rule; pred receives a malloc'd string. */
static int grade_output(const char *grader, const char *text, const char *reference, char **pred,
                        struct eb_err *e)
{
    *pred = NULL;
    if (grader && !strcmp(grader, "code")) {
        struct code_limits lim;
        struct code_result res;
        code_limits_default(&lim);
        if (code_grade(text, reference, &lim, &res, e)) return -1;
        *pred = strdup(code_verdict_name(res.verdict));
        return res.passed;
    }
    enum grade_dataset ds = grader && !strcmp(grader, "gsm8k") ? GRADE_GSM8K : GRADE_MATH;
    int c = grade_answer(text, reference, ds, pred);
    if (c < 0) return eb_fail(e, "out of memory while grading");
    return c;
}

int fill_sample(struct runner *r, struct run_output *o, struct sample_record *s,
                       const struct runner_item *it, const char *grader, int think_open,
                       const struct gen_result *g, const struct seq_meas *ms, struct eb_err *e)
{
    char *text = NULL;
    size_t tl = 0;
    if (r->s.tok) {
        if (tokenizer_decode(r->s.tok, g->tokens, g->n_tokens, &text, &tl, e)) return -1;
    } else if (!(text = ids_text(g->tokens, g->n_tokens))) {
        return eb_fail(e, "out of memory");
    }
    if (!own(o, text)) return eb_fail(e, "out of memory");
    char *pred = NULL;
    int correct = grade_output(grader, text, it->reference, &pred, e);
    if (correct < 0) return -1;
    s->item_id = it->id;
    s->prompt_tokens = it->n_prompt;
    s->gen_tokens = g->n_tokens;
    s->finished = g->finish == GEN_FINISH_EOS;
    s->correct = correct;
    s->pred_answer = own(o, pred);
    s->ref_answer = it->reference;
    s->text = text;
    /* Think tokens: those before "</think>"; when the model never closes its
     * reasoning and the prompt opened it (R1 template), all of them. */
    s->think_tokens = think_open ? g->n_tokens : STORE_NONE;
    for (int i = 0; r->s.think_end_id >= 0 && i < g->n_tokens; i++)
        if (g->tokens[i] == r->s.think_end_id) { s->think_tokens = i; break; }
    s->n_compressions = ms->compressions;
    s->peak_kv_bytes = (int64_t)g->peak_kv_bytes;
    s->mean_kv_bytes = ms->steps > 0 ? ms->kv_sum / (double)ms->steps : NAN;
    s->ttft_ms = g->ttft_s * 1e3;
    s->tpot_ms = ms->steps > 1 ? (ms->t_last - ms->t_first) * 1e3 / (double)(ms->steps - 1) : NAN;
    return 0;
}

/* ---- owned strings of a run_output ---- */

const char *own(struct run_output *o, char *s)
{
    if (!s) return NULL;
    if (o->n_owned == o->cap_owned) {
        int nc = o->cap_owned ? o->cap_owned * 2 : 64;
        char **np = realloc(o->owned, (size_t)nc * sizeof *np);
        if (!np) { free(s); return NULL; }
        o->owned = np;
        o->cap_owned = nc;
    }
    o->owned[o->n_owned++] = s;
    return s;
}

void run_output_free(struct run_output *o)
{
    for (int i = 0; i < o->n_owned; i++) free(o->owned[i]);
    free(o->owned);
    free(o->samples);
    free(o->sents);
    memset(o, 0, sizeof *o);
}

/* params_json as stored: the point's parameters, the resolved policy spec, the
 * weight mode and, for padded/grouped, the pad slots the left-padded batches held. */
char *stored_params(const struct point *pt, const char *spec,
                    long pad_tokens)
{
    cJSON *o = policy_params_json(&pt->params, 1);   /* as params_json, from the typed values */
    if (!o) return NULL;
    if (spec && spec[0]) cJSON_AddStringToObject(o, "policy_spec", spec);
    cJSON_AddStringToObject(o, "weights", model_weights_name(pt->weights));
    if (pt->batching == BATCHING_PADDED || pt->batching == BATCHING_GROUPED)
        cJSON_AddNumberToObject(o, "pad_tokens", (double)pad_tokens);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* The run row's identity: every field a point decides (the outcome fields
 * are filled as the run goes). */
void run_record_of_point(struct run_record *run, const struct runner *r,
                                const struct exp_config *cfg, const struct point *pt)
{
    run_record_init(run);
    run->run_key = pt->run_key;
    run->model = pt->model;
    run->dataset = pt->dataset;
    run->data_offset = pt->data_offset;
    run->data_limit = pt->data_limit >= 0 ? pt->data_limit : STORE_NONE;
    run->policy = pt->policy->name;
    run->budget = point_store_budget(pt);
    run->batch_size = pt->batch_size;
    run->batching = batching_name(pt->batching);
    run->sampling_json = pt->sampling_json;
    run->seed = cfg->sampling.seed;
    run->max_new_tokens = cfg->max_new_tokens;
    run->device = r->o.device ? r->o.device : "cpu";
    run->kv_type = kv_type_name(pt->kv_type);
    run->status = "ok";
}
