/* runner.c - run sweep points: schedule, generate, grade, measure, record. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
#include "harness/exp/runner_priv.h"


double now_s(void)
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

void set_error(struct run_output *o, const char *msg)
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
char *stored_params(const struct sweep_point *pt, const char *spec, long pad_tokens)
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
void run_record_of_point(struct run_record *run, const struct runner *r,
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
        char *text = user ? chat_render(tpl, user, e) : NULL;
        free(user);
        int *ids = NULL, nids = 0;
        if (!text || tokenizer_encode(r->tok, text, strlen(text), tpl != CHAT_RAW, &ids, &nids, e)) {
            free(text);
            if (!text && e->msg[0] == '\0') eb_fail(e, "out of memory");
            drop_items(r);
            return -1;
        }
        free(text);
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
