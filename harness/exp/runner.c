/* runner.c - run sweep points: schedule, generate, grade, measure, record. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "harness/grade/code_grader.h"
#include "datasets/dataset.h"
#include "kernels/backend.h"
#include "model/generate.h"
#include "model/model_tokenizer.h"
#include "policies/registry.h"
#include "policies/steering.h"
#include "harness/grade/grade.h"
#include "harness/exp/policy_glue.h"
#include "harness/exp/retention.h"
#include "harness/exp/runner_priv.h"
#include "util/clock.h"


int runner_create(const struct runner_opts *o, struct runner **out, struct eb_err *e)
{
    struct runner *r = eb_calloc(1, sizeof *r, e);
    if (!r) return -1;
    r->o = *o;
    struct session_opts so = {o->device, o->threads, o->mem_limit};
    session_init(&r->s, &so);
    /* Who holds a claim: unique across hosts sharing a database file and
     * across a pid reused after a crash. */
    char host[64] = "?";
    gethostname(host, sizeof host - 1);
    snprintf(r->owner, sizeof r->owner, "%.60s:%ld:%.3f", host, (long)getpid(), store_clock());
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

void runner_free(struct runner *r)
{
    if (!r) return;
    drop_items(r);
    session_close(&r->s);
    free(r);
}

/* The point's model, loaded once for every point that shares it (the
 * prompts, tokenised with it, go with it). */
static int ensure_model(struct runner *r, const char *name, enum model_weights weights,
                        struct eb_err *e)
{
    if (r->s.m && r->s.model_name && !strcmp(r->s.model_name, name) && r->s.weights == weights)
        return 0;
    drop_items(r);
    return session_model(&r->s, name, weights, e);
}

/* The state of one point's generation, shared by its batches. */
struct gen_run {
    struct runner *r;
    const struct exp_config *cfg;
    const struct point *pt;
    const struct runner_item *items;
    const char *grader;
    int ns, total, think_open;
    struct gen_request *reqs, *breqs;
    int *order;
    struct pad_buf pb;
    struct gen_result *res;
    struct seq_meas *meas;
    struct session_policy pp;
    struct run_output *out;
    struct runner_progress prog;
    long gen_tokens, pad_tokens, kv_steps;
    double gen_s, kv_sum, t_point;
    size_t peak_kv;
    int samples_done;
};

enum batch_end { BATCH_NEXT = 0, BATCH_LAST, BATCH_STOPPED, BATCH_FAILED };

/* The order requests run in: item order, or by prompt length when grouped. */
static int batch_order(struct gen_run *g, int n, struct eb_err *e)
{
    for (int i = 0; i < g->total; i++) g->order[i] = i;
    if (g->pt->batching != BATCHING_GROUPED) return 0;
    struct len_idx *li = eb_calloc((size_t)n, sizeof *li, e);
    if (!li) return -1;
    for (int i = 0; i < n; i++) li[i] = (struct len_idx){g->items[i].n_prompt, i};
    qsort(li, (size_t)n, sizeof *li, cmp_len_idx);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < g->ns; j++) g->order[i * g->ns + j] = li[i].idx * g->ns + j;
    free(li);
    return 0;
}

static void meas_init(struct gen_run *g, struct meas_ctx *mc)
{
    const struct model *m = g->r->s.m;
    memset(mc, 0, sizeof *mc);
    mc->seq = g->meas;
    mc->token_bytes = (size_t)m->cfg.n_layer * m->cfg.n_head_kv * m->cfg.head_dim * 2 *
                      kv_type_bytes(g->pt->kv_type);
    mc->kv_cap = (size_t)g->cfg->max_kv_bytes;
    /* One continuous batch is the whole point: let a stop request end it. */
    if (g->pt->batching == BATCHING_CONTINUOUS) mc->stop = g->r->o.stop;
    mc->r = g->r;
    mc->prog_base = &g->prog;
    mc->samples_done = &g->samples_done;
    mc->gen_tokens = &g->gen_tokens;
    mc->tokens_before = g->gen_tokens;
    mc->t0 = g->t_point;
    mc->last_report = clock_now_s();
}

/* Out of memory is decided before generating, from the runtime's estimate
 * (with the hooks set: a policy's slot limit shrinks the caches). */
static int over_memory(struct gen_run *g, int nb, const struct gen_options *opt)
{
    struct runner *r = g->r;
    size_t need = session_estimate(&r->s, g->breqs, nb, opt);
    size_t limit = session_mem_limit(&r->s);
    if (need <= limit) return 0;
    char msg[256];
    snprintf(msg, sizeof msg, "a batch of %d needs an estimated %zu bytes, more than the "
                              "%zu bytes %s", opt->max_live ? opt->max_live : nb, need, limit,
             r->o.mem_limit ? "allowed" : "available");
    set_oom(g->out, msg);
    return 1;
}

/* Grade and record batch [b0, b0 + nb) (res + b0 holds it in batch order). */
static int record_batch(struct gen_run *g, int b0, int nb, struct eb_err *e)
{
    for (int k = 0; k < nb; k++) {
        int q = g->order[b0 + k];
        struct sample_record *s = &g->out->samples[q];
        sample_record_init(s);
        s->sample_idx = q;
        /* meas is indexed by the request index within the generate call */
        if (fill_sample(g->r, g->out, s, &g->items[q / g->ns], g->grader, g->think_open,
                        &g->res[b0 + k], &g->meas[k], e))
            return -1;
        sample_trace_stats(&g->pp, k, s); /* policy sequence ids are batch positions */
        if (sample_retention(&g->pp, k, g->r, &g->res[b0 + k], g->out, s, e)) return -1;
        if (sample_sentences(&g->pp, k, q, g->out, e)) return -1;
    }
    return 0;
}

/* The KV bytes a finished batch reached; over max_kv_bytes it ends the point as oom. */
static int account_kv(struct gen_run *g, const struct gen_stats *st, const struct meas_ctx *mc)
{
    size_t batch_peak = st->peak_kv_bytes > mc->kv_peak_seen ? st->peak_kv_bytes : mc->kv_peak_seen;
    if (batch_peak > g->peak_kv) g->peak_kv = batch_peak;
    g->kv_sum += mc->batch_kv_sum;
    g->kv_steps += mc->batch_kv_steps;
    if (!g->cfg->max_kv_bytes || batch_peak <= (size_t)g->cfg->max_kv_bytes) return 0;
    char msg[256];
    snprintf(msg, sizeof msg, "the batch's KV cache reached %zu bytes, over max_kv_bytes %lld",
             batch_peak, (long long)g->cfg->max_kv_bytes);
    set_oom(g->out, msg);
    return 1;
}

static enum batch_end run_batch(struct gen_run *g, int b0, int nb, struct eb_err *e)
{
    const struct point *pt = g->pt;
    struct runner *r = g->r;
    int maxlen = 0;
    for (int k = 0; k < nb; k++) {
        g->breqs[k] = g->reqs[g->order[b0 + k]];
        if (g->breqs[k].n_prompt > maxlen) maxlen = g->breqs[k].n_prompt;
    }
    for (int k = 0; k < nb; k++) g->pad_tokens += maxlen - g->breqs[k].n_prompt;
    int padded = pt->batching == BATCHING_PADDED || pt->batching == BATCHING_GROUPED;
    if (padded && left_pad_batch(&g->pb, g->breqs, nb, maxlen, pad_token(r), e)) return BATCH_FAILED;
    struct meas_ctx mc;
    meas_init(g, &mc);
    struct gen_hooks mine = {.ctx = &mc, .begin_sequence = meas_begin, .on_step = meas_step,
                             .end_sequence = meas_end}, hooks;
    struct session_gen_opts so = {
        .max_live = pt->batching == BATCHING_CONTINUOUS ? pt->batch_size : 0,
        .n_pad = padded ? g->pb.n_pad : NULL, /* the estimate then covers the pads */
        .hooks = &mine, .policy = &g->pp, .kv_type = pt->kv_type};
    if (session_policy_glue(&g->pp, r->s.m, e) ||
        (g->pp.glue && policy_glue_record_retention(g->pp.glue, g->cfg->retention, e)))
        return BATCH_FAILED;
    struct gen_options opt;
    session_gen_options(&r->s, &so, &hooks, &opt);
    if (over_memory(g, nb, &opt)) return BATCH_LAST;

    struct gen_stats st;
    struct eb_err ge = {0};
    double t0 = clock_now_s();
    int grc = session_generate(&r->s, g->breqs, nb, &so, g->res + b0, &st, &ge);
    g->gen_s += clock_now_s() - t0;
    if (grc) {
        if (mc.stopped) return BATCH_STOPPED;
        /* The KV bytes reached are part of an oom row.  A failed allocation
         * is an out-of-memory result, as the papers record one; anything
         * else is an error to retry. */
        if (mc.kv_peak_seen > g->peak_kv) g->peak_kv = mc.kv_peak_seen;
        if (mc.kv_exceeded || ge.kind == EB_ERR_NOMEM) set_oom(g->out, ge.msg);
        else set_error(g->out, ge.msg);
        return BATCH_LAST;
    }
    if (account_kv(g, &st, &mc)) return BATCH_LAST;
    if (record_batch(g, b0, nb, e)) return BATCH_FAILED;
    if (pt->batching != BATCHING_CONTINUOUS) {
        g->prog.samples_done = b0 + nb;
        g->prog.gen_tokens = g->gen_tokens;
        g->prog.elapsed_s = clock_now_s() - g->t_point;
        report(r, &g->prog);
    }
    if (r->o.stop && *r->o.stop && b0 + nb < g->total) return BATCH_STOPPED;
    return BATCH_NEXT;
}

/* The run row's totals once every batch ran (or one ended the point). */
static int finish_run(struct gen_run *g, struct eb_err *e)
{
    struct run_output *out = g->out;
    if (strcmp(out->run.status, "ok") != 0) {
        out->n_samples = 0; /* oom and error runs carry no samples, nor sentences */
        out->n_sents = 0;
    } else {
        out->n_samples = g->total;
    }
    struct retention *rec = g->pp.glue ? policy_glue_retention(g->pp.glue) : NULL;
    if (rec && g->gen_s > 0)
        fprintf(stderr, "retention record: %.1f ms over %.1f s of generation (%.3f%%)\n",
                rec->cost_s * 1e3, g->gen_s, 100.0 * rec->cost_s / g->gen_s);
    out->run.wall_s = clock_now_s() - g->t_point;
    out->run.gen_tokens = g->gen_tokens;
    out->run.tokens_per_s = g->gen_s > 0 ? (double)g->gen_tokens / g->gen_s : NAN;
    out->run.peak_kv_bytes = (int64_t)g->peak_kv;
    out->run.mean_kv_bytes = g->kv_steps > 0 ? g->kv_sum / (double)g->kv_steps : NAN;
    if (!(out->run.params_json = own(out, stored_params(g->pt, g->pp.spec, g->pad_tokens))))
        return eb_fail(e, "out of memory");
    return 0;
}

static void gen_run_free(struct gen_run *g)
{
    for (int i = 0; g->res && i < g->total; i++) free(g->res[i].tokens);
    session_policy_close(&g->pp);
    free(g->res);
    free(g->reqs);
    free(g->order);
    free(g->breqs);
    pad_buf_free(&g->pb);
    free(g->meas);
}

static int run_generate(struct runner *r, const struct exp_config *cfg, const struct point *pt,
                        const struct runner_item *items, int n, struct run_output *out,
                        struct eb_err *e)
{
    memset(out, 0, sizeof *out);
    struct gen_run g;
    memset(&g, 0, sizeof g);
    g.t_point = clock_now_s();
    if (ensure_model(r, pt->model, pt->weights, e)) return -1;
    if (n < 1) return eb_fail(e, "%s: no items to run", pt->dataset);
    g.grader = point_grader(pt);
    g.r = r; g.cfg = cfg; g.pt = pt; g.items = items; g.out = out;
    g.ns = cfg->sampling.n_samples;
    g.total = n * g.ns;
    g.think_open = prompt_opens_think(r, cfg);
    g.reqs = make_requests(cfg, pt, items, n, e);
    g.order = eb_calloc((size_t)g.total, sizeof *g.order, e);
    g.breqs = eb_calloc((size_t)g.total, sizeof *g.breqs, e);
    g.res = eb_calloc((size_t)g.total, sizeof *g.res, e);
    g.meas = eb_calloc((size_t)g.total, sizeof *g.meas, e);
    out->samples = eb_calloc((size_t)g.total, sizeof *out->samples, e);
    int rc = -1;
    if (!g.reqs || !g.order || !g.breqs || !g.res || !g.meas || !out->samples) goto fail;
    if (point_policy_open(&g.pp, r, cfg, pt, e)) goto fail;
    if (batch_order(&g, n, e)) goto fail;
    int bs = pt->batching == BATCHING_CONTINUOUS ? g.total : pt->batch_size;
    if (bs > g.total) bs = g.total;
    run_record_of_point(&out->run, r, cfg, pt);
    char label[512];
    sweep_point_label(pt, label, sizeof label);
    g.prog.label = label;
    g.prog.n_samples = g.total;
    g.prog.event = "batch";
    enum batch_end end = BATCH_NEXT;
    for (int b0 = 0; b0 < g.total && end == BATCH_NEXT; b0 += bs)
        end = run_batch(&g, b0, g.total - b0 < bs ? g.total - b0 : bs, e);
    if (end == BATCH_STOPPED) rc = 1;
    else if (end != BATCH_FAILED && finish_run(&g, e) == 0) rc = 0;
fail:
    if (rc) run_output_free(out);
    gen_run_free(&g);
    return rc;
}

/* ---- prompts from a dataset ---- */

static int load_items(struct runner *r, const struct exp_config *cfg, const struct point *pt,
                      struct eb_err *e)
{
    char key[1024];
    snprintf(key, sizeof key, "%s|%s|%d|%d|%s", pt->model, pt->dataset, pt->data_offset,
             pt->data_limit, cfg->prompt->name);
    if (r->items_key && !strcmp(r->items_key, key)) return 0;
    drop_items(r);
    if (!r->s.tok) return eb_fail(e, "%s: the model has no tokenizer", pt->model);
    enum chat_template tpl;
    if (chat_template_parse(cfg->prompt->chat, &tpl, e)) return -1;
    if (dataset_load(pt->dataset, r->o.data_dir, pt->data_offset, pt->data_limit, &r->ds, e))
        return -1;
    if (r->ds.n == 0) return eb_fail(e, "%s: no items at offset %d", pt->dataset, pt->data_offset);
    r->items = eb_calloc((size_t)r->ds.n, sizeof *r->items, e);
    r->item_ids = eb_calloc((size_t)r->ds.n, sizeof *r->item_ids, e);
    if (!r->items || !r->item_ids) { drop_items(r); return -1; }
    r->n_items = r->ds.n;
    for (int i = 0; i < r->ds.n; i++) {
        char *user = prompt_user_text(cfg->prompt, r->ds.items[i].problem);
        int *ids = NULL, nids = 0;
        if (!user || session_encode(&r->s, tpl, cfg->prompt->add_bos, user, strlen(user), &ids,
                                    &nids, e)) {
            if (!user) eb_fail(e, "out of memory");
            free(user);
            drop_items(r);
            return eb_wrap(e, r->ds.items[i].id ? r->ds.items[i].id : pt->dataset);
        }
        free(user);
        r->item_ids[i] = ids;
        r->items[i].id = r->ds.items[i].id;
        r->items[i].reference = r->ds.items[i].answer;
        r->items[i].prompt = ids;
        r->items[i].n_prompt = nids;
    }
    if (!(r->items_key = strdup(key))) { drop_items(r); return eb_fail(e, "out of memory"); }
    return 0;
}

int runner_run_point(struct runner *r, const struct exp_config *cfg, const struct point *pt,
                     struct run_output *out, struct eb_err *e)
{
    memset(out, 0, sizeof *out);
    const struct runner_item *items = r->o.items;
    int n = r->o.n_items;
    if (ensure_model(r, pt->model, pt->weights, e)) return -1;
    if (!items) {
        if (load_items(r, cfg, pt, e)) return -1;
        items = r->items;
        n = r->n_items;
    }
    return runner_run_items(r, cfg, pt, items, n, out, e);
}

int runner_run_items(struct runner *r, const struct exp_config *cfg, const struct point *pt,
                     const struct runner_item *items, int n, struct run_output *out,
                     struct eb_err *e)
{
    memset(out, 0, sizeof *out);
    if (ensure_model(r, pt->model, pt->weights, e)) return -1;
    if (n < 1) return eb_fail(e, "%s: no items to run", pt->dataset);
    if (cfg->mode == EXP_MODE_FIDELITY) return run_fidelity(r, cfg, pt, items, n, out, e);
    return run_generate(r, cfg, pt, items, n, out, e);
}

/* ---- the sweep ---- */

/* 1 (and its lease ended) when the claim on run_key belongs to a process of
 * this host that no longer exists (killed, crashed): no need to wait for its
 * lease.  Owners are "host:pid:start" (runner_create). */
static int owner_dead(const struct runner *r, struct store *st, const char *run_key,
                      struct eb_err *e)
{
    char owner[128];
    int has = store_claim_owner(st, run_key, owner, sizeof owner, e);
    if (has <= 0) return has;
    const char *mine = strchr(r->owner, ':'), *theirs = strchr(owner, ':');
    if (!mine || !theirs || mine - r->owner != theirs - owner ||
        strncmp(r->owner, owner, (size_t)(mine - r->owner)))
        return 0;                                   /* another host: trust the lease */
    long pid = strtol(theirs + 1, NULL, 10);
    if (pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH) return 0;
    return store_claim_expire(st, run_key, owner, e) ? -1 : 1;
}

/* One point of a sweep: skip it when done, leave it when another process
 * holds its claim, else claim, run, record and release it.  Returns 0
 * (handled), 1 (interrupted), 2 (claimed by another process), -1 (error). */
static int sweep_point(struct runner *r, const struct sweep *s, int i, struct store *st,
                       int64_t exp_id, struct sweep_summary *sum, struct eb_err *e)
{
    const struct point *pt = &s->pts[i];
    char label[512];
    sweep_point_label(pt, label, sizeof label);
    r->point = i + 1;
    struct runner_progress prog;
    memset(&prog, 0, sizeof prog);
    prog.label = label;
    prog.eta_s = -1;
    if (r->o.stop && *r->o.stop) return 1;
    int done = store_run_done(st, pt->run_key, e);
    if (done < 0) return -1;
    if (done) {
        sum->skipped++;
        prog.event = "skip";
        report(r, &prog);
        return 0;
    }
    double lease = r->o.lease_s > 0 ? r->o.lease_s : 600;
    int mine = store_claim(st, pt->run_key, r->owner, lease, e);
    if (mine == 0 && owner_dead(r, st, pt->run_key, e) > 0)
        mine = store_claim(st, pt->run_key, r->owner, lease, e);
    if (mine <= 0) return mine < 0 ? -1 : 2;
    /* Another process may have recorded it and released its claim between
     * the check above and our claim: look again, now that it is ours. */
    if ((done = store_run_done(st, pt->run_key, e)) != 0) {
        struct eb_err re = {0};
        store_release(st, pt->run_key, r->owner, &re);
        if (done < 0) return -1;
        sum->skipped++;
        prog.event = "skip";
        report(r, &prog);
        return 0;
    }
    r->claim_st = st;
    r->claim_key = pt->run_key;
    r->claim_renewed = store_clock();
    struct run_output out;
    double t0 = clock_now_s();
    int rc = runner_run_point(r, s->cfg, pt, &out, e);
    r->claim_st = NULL;
    if (rc != 0) {
        struct eb_err re = {0};
        store_release(st, pt->run_key, r->owner, &re);   /* let another process take it */
        if (rc == 1) return 1;
        char where[600];
        snprintf(where, sizeof where, "point %d/%d (%s)", i + 1, s->n, label);
        return eb_wrap(e, where);
    }
    out.run.experiment_id = exp_id;
    rc = store_write_run(st, &out.run, out.samples, out.n_samples, out.sents, out.n_sents, e);
    if (rc >= 0) rc = store_release(st, pt->run_key, r->owner, e);
    double dt = clock_now_s() - t0;
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
    return 0;
}

int runner_sweep(struct runner *r, const struct sweep *s, struct store *st, int64_t exp_id,
                 struct sweep_summary *sum, struct eb_err *e)
{
    memset(sum, 0, sizeof *sum);
    sum->n_points = s->n;
    r->n_points = s->n;
    r->points_run = 0;
    r->points_run_s = 0;
    char *held = eb_calloc((size_t)s->n, 1, e);
    if (!held) return -1;
    int n_held = 0, rc = 0;
    /* First pass in order; then wait for the points other processes hold:
     * they finish them (skipped here as done), or their lease runs out and
     * the point is taken here. */
    for (int pass = 0; rc == 0 && (pass == 0 || n_held > 0); pass++) {
        if (pass > 0) {
            struct timespec ts = {0, 200000000L};
            nanosleep(&ts, NULL);
        }
        for (int i = 0; i < s->n && rc == 0; i++) {
            if (pass > 0 && !held[i]) continue;
            int prc = sweep_point(r, s, i, st, exp_id, sum, e);
            if (prc == 2 && !held[i]) { held[i] = 1; n_held++; }
            if ((prc == 0 || prc == 1) && held[i]) { held[i] = 0; n_held--; }
            if (prc == 1) { sum->interrupted = 1; rc = 1; }
            if (prc < 0) rc = -1;
        }
    }
    free(held);
    return rc < 0 ? -1 : 0;
}
