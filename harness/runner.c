/* runner.c - run sweep points: schedule, generate, grade, measure, record. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "../datasets/code_grader.h"
#include "../datasets/dataset.h"
#include "../kernels/backend.h"
#include "../model/generate.h"
#include "../model/model_tokenizer.h"
#include "../policies/registry.h"
#include "../policies/steering.h"
#include "grade.h"
#include "policy_glue.h"
#include "runner.h"

struct runner {
    struct runner_opts o;
    struct backend *be;
    /* the model of the last point, kept loaded for the next one */
    char *model_name;
    struct model_file *mf;
    struct model *m;
    struct tokenizer *tok;     /* NULL: the model file has none */
    int think_end_id;          /* "</think>" or -1 */
    /* the prompts of the last point, tokenised */
    char *items_key;
    struct dataset ds;
    struct runner_item *items;
    int **item_ids;
    int n_items;
    /* progress across the sweep */
    int point, n_points;
    double sweep_t0;
    int points_run;
    double points_run_s;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int runner_create(const struct runner_opts *o, struct runner **out, struct eb_err *e)
{
    struct runner *r = eb_calloc(1, sizeof *r, e);
    if (!r) return -1;
    r->o = *o;
    r->think_end_id = -1;
    *out = r;
    return 0;
}

static void drop_items(struct runner *r)
{
    for (int i = 0; r->item_ids && i < r->n_items; i++) free(r->item_ids[i]);
    free(r->item_ids);
    free(r->items);
    free(r->items_key);
    dataset_free(&r->ds);
    r->item_ids = NULL;
    r->items = NULL;
    r->items_key = NULL;
    r->n_items = 0;
}

static void drop_model(struct runner *r)
{
    drop_items(r);
    model_free(r->m);
    tokenizer_free(r->tok);
    model_file_close(r->mf);
    free(r->model_name);
    r->m = NULL;
    r->tok = NULL;
    r->mf = NULL;
    r->model_name = NULL;
    r->think_end_id = -1;
}

void runner_free(struct runner *r)
{
    if (!r) return;
    drop_model(r);
    if (r->be) r->be->destroy(r->be);
    free(r);
}

static int ensure_model(struct runner *r, const char *name, struct eb_err *e)
{
    if (r->model_name && !strcmp(r->model_name, name)) return 0;
    drop_model(r);
    if (!r->be && !(r->be = backend_cpu_create(r->o.threads)))
        return eb_fail(e, "cannot create the CPU backend");
    if (model_file_open(name, &r->mf, e)) return -1;
    struct eb_err te = {0};
    if (model_file_tokenizer(r->mf, &r->tok, &te)) r->tok = NULL; /* tests' tiny models */
    if (model_load(r->mf, r->be, &r->m, e)) { drop_model(r); return -1; }
    if (!(r->model_name = strdup(name))) { drop_model(r); return eb_fail(e, "out of memory"); }
    r->think_end_id = r->tok ? tokenizer_find(r->tok, "</think>") : -1;
    return 0;
}

/* ---- owned strings of a run_output ---- */

static const char *own(struct run_output *o, char *s)
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

/* ---- per-sequence measurements, taken through the generation hooks ----
 * They run after the policy's own hooks (policy_glue calls them last), so at
 * each step the cache is already compacted.  The size it had before is known:
 * the size at the previous step plus one token (the prompt at the first). */

struct seq_meas {
    double t_first, t_last;    /* first and last sampled token */
    long steps;
    double kv_sum;             /* bytes summed over steps, for the mean */
    size_t kv_seen;            /* bytes at the last step (after any compaction) */
    int n_prompt;
    int compressions;
};

struct meas_ctx {
    struct seq_meas *seq;            /* by request index of this generate call */
    size_t token_bytes;              /* K+V bytes one token adds to a cache */
    size_t kv_total;                 /* sum of kv_seen over live sequences */
    size_t kv_cap;                   /* 0: none */
    int kv_exceeded;
    size_t kv_peak_seen;
    double batch_kv_sum;             /* batch KV summed over steps, for the run's mean */
    long batch_kv_steps;
    volatile sig_atomic_t *stop;     /* continuous batching: abandon the batch when set */
    int stopped;
    /* progress of continuous batching */
    struct runner *r;
    const struct runner_progress *prog_base;
    int *samples_done;
    long *gen_tokens;                /* tokens of finished sequences */
    long tokens_before;              /* generated before this batch */
    long steps;                      /* tokens sampled in this batch so far */
    double t0, last_report;
};

static void report(struct runner *r, const struct runner_progress *p);

static int meas_begin(void *ctx, int seq, const struct gen_request *req, struct kvcache *cache,
                      struct eb_err *e)
{
    (void)cache; (void)e;
    struct meas_ctx *c = ctx;
    memset(&c->seq[seq], 0, sizeof c->seq[seq]);
    c->seq[seq].n_prompt = req->n_prompt;
    return 0;
}

static int meas_step(void *ctx, int seq, int token, struct kvcache *cache, struct eb_err *e)
{
    (void)token;
    struct meas_ctx *c = ctx;
    struct seq_meas *s = &c->seq[seq];
    if (c->stop && *c->stop) {
        c->stopped = 1;
        return eb_fail(e, "stopped");
    }
    double t = now_s();
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

static void meas_end(void *ctx, int seq, const struct gen_result *res)
{
    struct meas_ctx *c = ctx;
    c->kv_total -= c->seq[seq].kv_seen;
    c->seq[seq].kv_seen = 0;
    if (c->samples_done) {
        (*c->samples_done)++;
        *c->gen_tokens += res->n_tokens;
        double t = now_s();
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

static void report(struct runner *r, const struct runner_progress *in)
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
static int prompt_opens_think(const struct runner *r, const struct exp_config *cfg)
{
    return !r->o.items && !strcmp(cfg->prompt->chat, "r1") && r->think_end_id >= 0;
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

static int fill_sample(struct runner *r, struct run_output *o, struct sample_record *s,
                       const struct runner_item *it, const char *grader, int think_open,
                       const struct gen_result *g, const struct seq_meas *ms, struct eb_err *e)
{
    char *text = NULL;
    size_t tl = 0;
    if (r->tok) {
        if (tokenizer_decode(r->tok, g->tokens, g->n_tokens, &text, &tl, e)) return -1;
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
    for (int i = 0; r->think_end_id >= 0 && i < g->n_tokens; i++)
        if (g->tokens[i] == r->think_end_id) { s->think_tokens = i; break; }
    s->n_compressions = ms->compressions;
    s->peak_kv_bytes = (int64_t)g->peak_kv_bytes;
    s->mean_kv_bytes = ms->steps > 0 ? ms->kv_sum / (double)ms->steps : NAN;
    s->ttft_ms = g->ttft_s * 1e3;
    s->tpot_ms = ms->steps > 1 ? (ms->t_last - ms->t_first) * 1e3 / (double)(ms->steps - 1) : NAN;
    return 0;
}

/* ---- the policy step ----
 * A point's policy instance and its glue to the generation hooks.  FullKV
 * runs without either: it asks for nothing and pays nothing. */
struct point_policy {
    struct policy *pol;
    struct policy_glue *glue;
    char spec[256];                  /* resolved "name:key=value,..." */
    char identity[256];              /* the model's steering identity (policy_model) */
};

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

static int point_policy_open(struct point_policy *pp, const struct runner *r,
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
static void sample_trace_stats(const struct point_policy *pp, int seq, struct sample_record *s)
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
static int sample_sentences(const struct point_policy *pp, int seq, int64_t sample_idx,
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
static void point_policy_hooks(struct point_policy *pp, const struct gen_hooks *mine,
                               struct gen_hooks *out)
{
    if (pp->glue) policy_glue_hooks(pp->glue, mine, out);
    else *out = *mine;
}

static void point_policy_close(struct point_policy *pp)
{
    policy_glue_free(pp->glue);
    policy_free(pp->pol);
    memset(pp, 0, sizeof *pp);
}

/* ---- the schedule ---- */

/* (prompt length, item) pairs sort by length, ties in item order. */
struct len_idx {
    int len, idx;
};

static int cmp_len_idx(const void *a, const void *b)
{
    const struct len_idx *x = a, *y = b;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

static void set_oom(struct run_output *o, const char *msg)
{
    o->run.status = "oom";
    o->run.error = own(o, strdup(msg));
}

static void set_error(struct run_output *o, const char *msg)
{
    o->run.status = "error";
    o->run.error = own(o, strdup(msg));
}

/* Requests of a point: item i, sample j -> index i * n_samples + j. */
static struct gen_request *make_requests(const struct exp_config *cfg, const struct sweep_point *pt,
                                         const struct runner_item *items, int n, struct eb_err *e)
{
    int ns = cfg->sampling.n_samples;
    struct gen_request *reqs = eb_calloc((size_t)n * ns, sizeof *reqs, e);
    if (!reqs) return NULL;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < ns; j++) {
            struct gen_request *q = &reqs[i * ns + j];
            q->prompt = items[i].prompt;
            q->n_prompt = items[i].n_prompt;
            q->max_new = cfg->max_new_tokens;
            if (cfg->max_total_tokens) {
                int room = cfg->max_total_tokens - items[i].n_prompt;
                if (room < q->max_new) q->max_new = room > 0 ? room : 1;
            }
            if (cfg->sampling.greedy) {
                q->sampling = sampler_params_greedy();
            } else {
                q->sampling.greedy = 0;
                q->sampling.temperature = (float)cfg->sampling.temperature;
                q->sampling.top_p = (float)cfg->sampling.top_p;
                q->sampling.top_k = cfg->sampling.top_k;
                q->sampling.seed = cfg->sampling.seed +
                                   ((uint64_t)pt->data_offset + (uint64_t)i) * (uint64_t)ns +
                                   (uint64_t)j;
            }
        }
    return reqs;
}

/* ---- left padding (padded and grouped batching) ----
 * A static batch is left-padded to its longest prompt, as the papers' Hugging
 * Face scripts do: the pads are real cache slots (bytes, budget) that
 * attention masks; see gen_options.n_pad for positions. */

struct pad_buf {
    int *tokens;             /* the batch's padded prompts, [nb][maxlen] */
    size_t cap;
    int *n_pad;              /* [nb] pads of each request */
    int n_cap;
};

static void pad_buf_free(struct pad_buf *pb)
{
    free(pb->tokens);
    free(pb->n_pad);
    memset(pb, 0, sizeof *pb);
}

/* The token the pads hold: the model file names no pad token to this loader,
 * so EOS, as the reference scripts do when the tokenizer has no pad.  Its
 * value never reaches a real token (pads are masked). */
static int pad_token(const struct runner *r)
{
    int id = r->tok ? tokenizer_eos(r->tok) : -1;
    if (id < 0 && r->m->cfg.n_eos > 0) id = r->m->cfg.eos_ids[0];
    return id >= 0 && id < r->m->cfg.n_vocab ? id : 0;
}

/* Rewrite reqs[0..nb) to point at left-padded copies of their prompts, each
 * maxlen tokens long; pb->n_pad gets the pad counts for gen_options.n_pad. */
static int left_pad_batch(struct pad_buf *pb, struct gen_request *reqs, int nb, int maxlen,
                          int pad_id, struct eb_err *e)
{
    size_t need = (size_t)nb * (size_t)maxlen;
    if (need > pb->cap) {
        int *t = realloc(pb->tokens, need * sizeof *t);
        if (!t) return eb_fail(e, "out of memory for a padded batch of %zu tokens", need);
        pb->tokens = t;
        pb->cap = need;
    }
    if (nb > pb->n_cap) {
        int *p = realloc(pb->n_pad, (size_t)nb * sizeof *p);
        if (!p) return eb_fail(e, "out of memory for a padded batch");
        pb->n_pad = p;
        pb->n_cap = nb;
    }
    for (int k = 0; k < nb; k++) {
        int *row = pb->tokens + (size_t)k * maxlen, pads = maxlen - reqs[k].n_prompt;
        for (int t = 0; t < pads; t++) row[t] = pad_id;
        memcpy(row + pads, reqs[k].prompt, (size_t)reqs[k].n_prompt * sizeof *row);
        pb->n_pad[k] = pads;
        reqs[k].prompt = row;
        reqs[k].n_prompt = maxlen;
    }
    return 0;
}

/* params_json as stored: the point's parameters, the resolved policy spec and,
 * for padded/grouped, the pad slots the left-padded batches held. */
static char *stored_params(const struct sweep_point *pt, const char *spec, long pad_tokens)
{
    cJSON *o = cJSON_Parse(pt->params_json);
    if (!o) return NULL;
    if (spec && spec[0]) cJSON_AddStringToObject(o, "policy_spec", spec);
    if (pt->batching == BATCHING_PADDED || pt->batching == BATCHING_GROUPED)
        cJSON_AddNumberToObject(o, "pad_tokens", (double)pad_tokens);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* The run row's identity: every field a point decides (the outcome fields
 * are filled as the run goes). */
static void run_record_of_point(struct run_record *run, const struct runner *r,
                                const struct exp_config *cfg, const struct sweep_point *pt)
{
    run_record_init(run);
    run->run_key = pt->run_key;
    run->model = pt->model;
    run->dataset = pt->dataset;
    run->data_offset = pt->data_offset;
    run->data_limit = pt->data_limit >= 0 ? pt->data_limit : STORE_NONE;
    run->policy = pt->policy;
    run->budget = pt->budget >= 0 ? pt->budget : STORE_NONE;
    run->batch_size = pt->batch_size;
    run->batching = batching_name(pt->batching);
    run->sampling_json = pt->sampling_json;
    run->seed = cfg->sampling.seed;
    run->max_new_tokens = cfg->max_new_tokens;
    run->device = r->o.device ? r->o.device : "cpu";
    run->status = "ok";
}

static int run_generate(struct runner *r, const struct exp_config *cfg, const struct sweep_point *pt,
                        const struct runner_item *items, int n, struct run_output *out,
                        struct eb_err *e)
{
    memset(out, 0, sizeof *out);
    double t_point = now_s();
    if (ensure_model(r, pt->model, e)) return -1;
    if (n < 1) return eb_fail(e, "%s: no items to run", pt->dataset);
    const struct dataset_spec *dspec = dataset_find(pt->dataset, NULL);
    const char *grader = dspec ? dspec->grader : "math";

    int ns = cfg->sampling.n_samples, total = n * ns, rc = -1;
    int think_open = prompt_opens_think(r, cfg);
    struct gen_request *reqs = make_requests(cfg, pt, items, n, e);
    int *order = eb_calloc((size_t)total, sizeof *order, e);
    struct gen_request *breqs = eb_calloc((size_t)total, sizeof *breqs, e);
    struct pad_buf pb = {0};
    struct gen_result *res = eb_calloc((size_t)total, sizeof *res, e);
    struct seq_meas *meas = eb_calloc((size_t)total, sizeof *meas, e);
    out->samples = eb_calloc((size_t)total, sizeof *out->samples, e);
    struct point_policy pp;
    memset(&pp, 0, sizeof pp);
    if (!reqs || !order || !breqs || !res || !meas || !out->samples) goto fail;
    if (point_policy_open(&pp, r, cfg, pt->policy, pt->params_json, pt->budget, e)) goto fail;

    /* The order requests run in, and the batches over that order. */
    for (int i = 0; i < total; i++) order[i] = i;
    if (pt->batching == BATCHING_GROUPED) {
        struct len_idx *li = eb_calloc((size_t)n, sizeof *li, e);
        if (!li) goto fail;
        for (int i = 0; i < n; i++) li[i] = (struct len_idx){items[i].n_prompt, i};
        qsort(li, (size_t)n, sizeof *li, cmp_len_idx);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < ns; j++) order[i * ns + j] = li[i].idx * ns + j;
        free(li);
    }
    int bs = pt->batching == BATCHING_CONTINUOUS ? total : pt->batch_size;
    if (bs > total) bs = total;

    run_record_of_point(&out->run, r, cfg, pt);

    long gen_tokens = 0, pad_tokens = 0;
    double gen_s = 0, kv_sum = 0;
    long kv_steps = 0;
    size_t peak_kv = 0;
    int samples_done = 0;
    struct runner_progress prog;
    memset(&prog, 0, sizeof prog);
    char label[512];
    sweep_point_label(pt, label, sizeof label);
    prog.label = label;
    prog.n_samples = total;
    prog.event = "batch";

    for (int b0 = 0; b0 < total; b0 += bs) {
        int nb = total - b0 < bs ? total - b0 : bs;
        int maxlen = 0;
        for (int k = 0; k < nb; k++) {
            breqs[k] = reqs[order[b0 + k]];
            if (breqs[k].n_prompt > maxlen) maxlen = breqs[k].n_prompt;
        }
        for (int k = 0; k < nb; k++) pad_tokens += maxlen - breqs[k].n_prompt;
        int padded = pt->batching == BATCHING_PADDED || pt->batching == BATCHING_GROUPED;
        if (padded && left_pad_batch(&pb, breqs, nb, maxlen, pad_token(r), e)) goto fail;
        struct gen_options opt;
        memset(&opt, 0, sizeof opt);
        opt.max_live = pt->batching == BATCHING_CONTINUOUS ? pt->batch_size : 0;
        opt.n_vocab_valid = r->tok ? tokenizer_n_vocab(r->tok) : 0;
        opt.mem_limit = r->o.mem_limit;
        opt.n_pad = padded ? pb.n_pad : NULL; /* the estimate below then covers the pads */

        struct meas_ctx mc;
        memset(&mc, 0, sizeof mc);
        mc.seq = meas;
        mc.token_bytes = (size_t)r->m->cfg.n_layer * r->m->cfg.n_head_kv * r->m->cfg.head_dim * 2 *
                         sizeof(float);
        mc.kv_cap = (size_t)cfg->max_kv_bytes;
        /* One continuous batch is the whole point: let a stop request end it. */
        if (pt->batching == BATCHING_CONTINUOUS) mc.stop = r->o.stop;
        mc.r = r;
        mc.prog_base = &prog;
        mc.samples_done = &samples_done;
        mc.gen_tokens = &gen_tokens;
        mc.tokens_before = gen_tokens;
        mc.t0 = t_point;
        mc.last_report = now_s();
        struct gen_hooks mine, hooks;
        memset(&mine, 0, sizeof mine);
        mine.ctx = &mc;
        mine.begin_sequence = meas_begin;
        mine.on_step = meas_step;
        mine.end_sequence = meas_end;
        point_policy_hooks(&pp, &mine, &hooks);
        opt.hooks = &hooks;

        /* Out of memory is decided before generating, from the runtime's estimate
         * (with the hooks set: a policy's slot limit shrinks the caches). */
        size_t need = generate_estimate_bytes(&r->m->cfg, r->m->weight_bytes, breqs, nb, &opt);
        size_t limit = r->o.mem_limit ? r->o.mem_limit
                                      : generate_available_memory() + r->m->weight_bytes;
        if (need > limit) {
            char msg[256];
            snprintf(msg, sizeof msg, "a batch of %d needs an estimated %zu bytes, more than the "
                                      "%zu bytes %s", opt.max_live ? opt.max_live : nb, need, limit,
                     r->o.mem_limit ? "allowed" : "available");
            set_oom(out, msg);
            break;
        }

        struct gen_stats st;
        struct eb_err ge = {0};
        double t0 = now_s();
        int grc = generate(r->m, breqs, nb, &opt, res + b0, &st, &ge);
        gen_s += now_s() - t0;
        if (grc) {
            if (mc.stopped) { rc = 1; goto stopped; }
            /* A failed allocation is an out-of-memory result, as the papers
             * record one; anything else is an error to retry. */
            if (mc.kv_exceeded || ge.kind == EB_ERR_NOMEM) set_oom(out, ge.msg);
            else set_error(out, ge.msg);
            break;
        }
        size_t batch_peak = st.peak_kv_bytes > mc.kv_peak_seen ? st.peak_kv_bytes : mc.kv_peak_seen;
        if (batch_peak > peak_kv) peak_kv = batch_peak;
        kv_sum += mc.batch_kv_sum;
        kv_steps += mc.batch_kv_steps;
        if (cfg->max_kv_bytes && batch_peak > (size_t)cfg->max_kv_bytes) {
            char msg[256];
            snprintf(msg, sizeof msg, "the batch's KV cache reached %zu bytes, over max_kv_bytes %lld",
                     batch_peak, (long long)cfg->max_kv_bytes);
            set_oom(out, msg);
            break;
        }
        /* res + b0 holds this batch's results in batch order; grade them. */
        for (int k = 0; k < nb; k++) {
            int q = order[b0 + k];
            struct sample_record *s = &out->samples[q];
            sample_record_init(s);
            s->sample_idx = q;
            /* meas is indexed by the request index within the generate call */
            if (fill_sample(r, out, s, &items[q / ns], grader, think_open, &res[b0 + k], &meas[k], e)) goto fail;
            sample_trace_stats(&pp, k, s); /* policy sequence ids are batch positions */
            if (sample_sentences(&pp, k, q, out, e)) goto fail;
        }
        if (pt->batching != BATCHING_CONTINUOUS) {
            prog.samples_done = b0 + nb;
            prog.gen_tokens = gen_tokens;
            prog.elapsed_s = now_s() - t_point;
            report(r, &prog);
        }
        if (r->o.stop && *r->o.stop && b0 + nb < total) { rc = 1; goto stopped; }
    }

    if (strcmp(out->run.status, "ok") != 0) {
        out->n_samples = 0; /* oom and error runs carry no samples, nor sentences */
        out->n_sents = 0;
    } else {
        out->n_samples = total;
    }
    out->run.wall_s = now_s() - t_point;
    out->run.gen_tokens = gen_tokens;
    out->run.tokens_per_s = gen_s > 0 ? (double)gen_tokens / gen_s : NAN;
    out->run.peak_kv_bytes = (int64_t)peak_kv;
    out->run.mean_kv_bytes = kv_steps > 0 ? kv_sum / (double)kv_steps : NAN;
    if (!(out->run.params_json = own(out, stored_params(pt, pp.spec, pad_tokens)))) {
        eb_fail(e, "out of memory");
        goto fail;
    }
    rc = 0;
    goto done;
stopped:
fail:
    run_output_free(out);
done:
    for (int i = 0; res && i < total; i++) free(res[i].tokens);
    point_policy_close(&pp);
    free(res);
    free(reqs);
    free(order);
    free(breqs);
    pad_buf_free(&pb);
    free(meas);
    return rc;
}

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

static int run_fidelity(struct runner *r, const struct exp_config *cfg, const struct sweep_point *pt,
                        const struct runner_item *items, int n, struct run_output *out,
                        struct eb_err *e)
{
    memset(out, 0, sizeof *out);
    double t0 = now_s();
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
        prog.elapsed_s = now_s() - t0;
        report(r, &prog);
        if (r->o.stop && *r->o.stop && i + 1 < n) { rc = 1; goto fail; }
    }
    out->n_samples = strcmp(out->run.status, "ok") ? 0 : n;
    if (!out->n_samples) out->n_sents = 0;
    out->run.wall_s = now_s() - t0;
    out->run.gen_tokens = gen_tokens;
    out->run.peak_kv_bytes = (int64_t)peak;
    if (!(out->run.params_json = own(out, stored_params(pt, pp.spec, 0)))) {
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

/* ---- prompts from a dataset ---- */

static int load_items(struct runner *r, const struct exp_config *cfg, const struct sweep_point *pt,
                      struct eb_err *e)
{
    char key[1024];
    snprintf(key, sizeof key, "%s|%s|%d|%d|%s", pt->model, pt->dataset, pt->data_offset,
             pt->data_limit, cfg->prompt->name);
    if (r->items_key && !strcmp(r->items_key, key)) return 0;
    drop_items(r);
    if (!r->tok) return eb_fail(e, "%s: the model has no tokenizer", pt->model);
    enum chat_template tpl;
    if (chat_template_parse(cfg->prompt->chat, &tpl, e)) return -1;
    if (dataset_load(pt->dataset, r->o.data_dir, pt->data_offset, pt->data_limit, &r->ds, e))
        return -1;
    if (r->ds.n == 0) return eb_fail(e, "%s: no items at offset %d", pt->dataset, pt->data_offset);
    r->items = eb_calloc((size_t)r->ds.n, sizeof *r->items, e);
    r->item_ids = eb_calloc((size_t)r->ds.n, sizeof *r->item_ids, e);
    if (!r->items || !r->item_ids) { drop_items(r); return -1; }
    r->n_items = r->ds.n;
    int bos = tokenizer_bos(r->tok);
    for (int i = 0; i < r->ds.n; i++) {
        char *user = prompt_user_text(cfg->prompt, r->ds.items[i].problem);
        int *ids = NULL, nids = 0;
        if (!user || chat_encode(r->tok, tpl, user, &ids, &nids, e)) {
            if (!user) eb_fail(e, "out of memory");
            free(user);
            drop_items(r);
            return -1;
        }
        free(user);
        if (cfg->prompt->add_bos && bos >= 0) {
            int *nb = realloc(ids, (size_t)(nids + 1) * sizeof *nb);
            if (!nb) { free(ids); drop_items(r); return eb_fail(e, "out of memory"); }
            memmove(nb + 1, nb, (size_t)nids * sizeof *nb);
            nb[0] = bos;
            ids = nb;
            nids++;
        }
        r->item_ids[i] = ids;
        r->items[i].id = r->ds.items[i].id;
        r->items[i].reference = r->ds.items[i].answer;
        r->items[i].prompt = ids;
        r->items[i].n_prompt = nids;
    }
    if (!(r->items_key = strdup(key))) { drop_items(r); return eb_fail(e, "out of memory"); }
    return 0;
}

int runner_run_point(struct runner *r, const struct exp_config *cfg, const struct sweep_point *pt,
                     struct run_output *out, struct eb_err *e)
{
    memset(out, 0, sizeof *out);
    const struct runner_item *items = r->o.items;
    int n = r->o.n_items;
    if (ensure_model(r, pt->model, e)) return -1;
    if (!items) {
        if (load_items(r, cfg, pt, e)) return -1;
        items = r->items;
        n = r->n_items;
    }
    return runner_run_items(r, cfg, pt, items, n, out, e);
}

int runner_run_items(struct runner *r, const struct exp_config *cfg, const struct sweep_point *pt,
                     const struct runner_item *items, int n, struct run_output *out,
                     struct eb_err *e)
{
    memset(out, 0, sizeof *out);
    if (ensure_model(r, pt->model, e)) return -1;
    if (n < 1) return eb_fail(e, "%s: no items to run", pt->dataset);
    if (cfg->mode == EXP_MODE_FIDELITY) return run_fidelity(r, cfg, pt, items, n, out, e);
    return run_generate(r, cfg, pt, items, n, out, e);
}

/* ---- the sweep ---- */

int runner_sweep(struct runner *r, const struct sweep *s, struct store *st, int64_t exp_id,
                 struct sweep_summary *sum, struct eb_err *e)
{
    memset(sum, 0, sizeof *sum);
    sum->n_points = s->n;
    r->n_points = s->n;
    r->points_run = 0;
    r->points_run_s = 0;
    for (int i = 0; i < s->n; i++) {
        const struct sweep_point *pt = &s->pts[i];
        char label[512];
        sweep_point_label(pt, label, sizeof label);
        r->point = i + 1;
        struct runner_progress prog;
        memset(&prog, 0, sizeof prog);
        prog.label = label;
        prog.eta_s = -1;
        if (r->o.stop && *r->o.stop) { sum->interrupted = 1; break; }
        int done = store_run_done(st, pt->run_key, e);
        if (done < 0) return -1;
        if (done) {
            sum->skipped++;
            prog.event = "skip";
            report(r, &prog);
            continue;
        }
        struct run_output out;
        double t0 = now_s();
        int rc = runner_run_point(r, s->cfg, pt, &out, e);
        if (rc < 0) {
            char where[600];
            snprintf(where, sizeof where, "point %d/%d (%s)", i + 1, s->n, label);
            eb_wrap(e, where);
            return -1;
        }
        if (rc == 1) { sum->interrupted = 1; break; }
        out.run.experiment_id = exp_id;
        rc = store_write_run(st, &out.run, out.samples, out.n_samples, out.sents, out.n_sents,
                             e);
        double dt = now_s() - t0;
        r->points_run++;
        r->points_run_s += dt;
        if (rc < 0) { run_output_free(&out); return -1; }
        if (!strcmp(out.run.status, "ok")) sum->ok++;
        else if (!strcmp(out.run.status, "oom")) sum->oom++;
        else sum->errors++;
        prog.event = !strcmp(out.run.status, "ok") ? "done" : out.run.status;
        prog.n_samples = out.n_samples;
        prog.samples_done = out.n_samples;
        prog.gen_tokens = (long)out.run.gen_tokens;
        prog.elapsed_s = dt;
        prog.label = out.run.error ? out.run.error : label;
        report(r, &prog);
        run_output_free(&out);
    }
    return 0;
}
